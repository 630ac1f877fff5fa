// The native-bfloat16 batch-norm loops (backend/cpu/batch_norm_activation_kernels_bf16.h) against
// the baseline compiled copies (force_baseline) bit for bit: forward and backward_dx for every
// activation, every length 1..100 and a few thousand (masked tails), aligned and unaligned,
// on random bit patterns, special values (NaN payloads, infinities, signed zeros, subnormals),
// pre-activations at relu6's 0 and 6 and exactly halfway between two bfloat16, and results that
// are float32 subnormals (where vcvtne2ps2bf16 would flush); also with MXCSR.DAZ set, in place,
// and which loops kernels() hands out. Skipped on a CPU without AVX512_BF16.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/batch_norm_activation_kernels.h"
#include "backend/cpu/batch_norm_activation_kernels_bf16.h"
#include "core/convert_kernels.h"

namespace mixprec {
namespace {

using cpu::bn_kernels::Act;
using cpu::bn_kernels::Coefficients;
using cpu::bn_kernels::Kernels;

constexpr Act kActs[] = {Act::none, Act::relu, Act::relu6, Act::sigmoid, Act::silu};
constexpr Act kNativeActs[] = {Act::none, Act::relu, Act::relu6};
constexpr std::uint16_t kCanary = 0xabcd;
constexpr std::int64_t kPad = 40;  // canary elements after the run

bool has_native() { return core::convert_isa_supported() >= core::ConvertIsa::avx512_bf16; }

#define MIXPREC_REQUIRE_NATIVE()                                                         \
  if (!has_native()) {                                                                   \
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (+AVX512DQ): no native bfloat16 loops"; \
  }

std::string name(Act act) {
  const char* names[] = {"none", "relu", "relu6", "sigmoid", "silu"};
  return names[static_cast<int>(act)];
}

Kernels<bfloat16> baseline(Act act) {
  cpu::bn_kernels::force_baseline(true);
  const Kernels<bfloat16> k = cpu::bn_kernels::kernels<bfloat16>(act);
  cpu::bn_kernels::force_baseline(false);
  return k;
}

// The loops under test: the native ones where act has them, else the widest compiled copy.
Kernels<bfloat16> native(Act act) {
  Kernels<bfloat16> k = cpu::bn_kernels::kernels<bfloat16>(act);
  cpu::bn_kernels::use_native_bf16_stores(act, k);
  return k;
}

enum class Data { random_bits, boundaries, tiny, specials };

// Inputs and per-element coefficients of one run.
struct Inputs {
  std::vector<bfloat16> x, dy;
  std::vector<float> mean, scale, shift, k, p, q;
};

float bits_float(std::uint32_t b) { return std::bit_cast<float>(b); }

// Half a bfloat16 step at v (a normal bfloat16 value): v + half lies exactly halfway.
float half_step(float v) {
  return v == 0.0f || !std::isfinite(v) ? 0.0f : std::ldexp(1.0f, std::ilogb(v) - 8);
}

template <typename Pool>
auto pick(std::mt19937& rng, const Pool& pool) {
  return pool[rng() % (sizeof(pool) / sizeof(pool[0]))];
}

// Special bfloat16 bit patterns: NaNs with payloads (quiet, signalling, negative), +-inf, +-0,
// subnormals, the largest finite, relu6's 6 and its neighbours, 1.
constexpr std::uint16_t kSpecial16[] = {0x7fc1, 0xffc0, 0x7f81, 0xff95, 0x7f80, 0xff80, 0x0000,
                                        0x8000, 0x0001, 0x807f, 0x0040, 0x7f7f, 0xff7f, 0x40c0,
                                        0x40bf, 0x40c1, 0xc0c0, 0x3f80, 0x0080, 0x8080};
// Special float32 coefficients: NaN with payload, +-inf, +-0, subnormals, huge, 1, -1.
const float kSpecial32[] = {
    bits_float(0x7fc12345u), bits_float(0xff800001u), INFINITY, -INFINITY, 0.0f,  -0.0f,
    bits_float(0x00000001u), bits_float(0x807fffffu), 3e38f,    1.0f,      -1.0f, 6.0f};

bfloat16 bf(float v) { return bfloat16(v); }

void fill_element(Data d, std::mt19937& rng, Inputs& r, std::size_t i) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (d) {
    case Data::random_bits:  // every 16-bit pattern; coefficients normal, some any 32-bit pattern
      r.x[i] = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
      r.dy[i] = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
      for (auto* v : {&r.mean, &r.scale, &r.shift, &r.k, &r.p, &r.q}) {
        (*v)[i] = rng() % 8 == 0 ? bits_float(static_cast<std::uint32_t>(rng())) : 2 * normal(rng);
      }
      break;
    case Data::boundaries: {  // pre = x + shift exactly: 0, 6, their neighbours, halfway cases
      const float x = rng() % 2 ? static_cast<float>(bfloat16::from_bits(pick(rng, kSpecial16)))
                                : static_cast<float>(bf(8 * normal(rng)));
      const float dy = static_cast<float>(bf(normal(rng)));
      r.x[i] = bf(x);
      r.dy[i] = bf(dy);
      r.mean[i] = rng() % 2 ? 0.0f : -0.0f;
      r.scale[i] = 1.0f;
      const int mode = static_cast<int>(rng() % 4);
      r.shift[i] =
          mode == 0 ? (rng() % 2 ? 0.0f : -0.0f) : (mode == 1 ? half_step(x) : -half_step(x));
      r.shift[i] = mode == 3 ? 6.0f - x : r.shift[i];  // pre 6 when x is finite
      r.k[i] = 1.0f;
      r.p[i] = rng() % 2 ? -half_step(dy) : half_step(dy);  // dx = dy - p halfway too
      r.q[i] = rng() % 2 ? 0.0f : -0.0f;
      break;
    }
    case Data::tiny:  // pre and dx around the float32 subnormal range (some lanes subnormal)
      r.x[i] = bf(100 * normal(rng));
      r.dy[i] = bf(100 * normal(rng));
      r.mean[i] = normal(rng);
      r.scale[i] = std::ldexp(normal(rng), -128 - static_cast<int>(rng() % 16));
      r.shift[i] = rng() % 4 == 0 ? std::ldexp(normal(rng), -130) : 0.0f;
      r.k[i] = std::ldexp(normal(rng), -126 - static_cast<int>(rng() % 16));
      r.p[i] = normal(rng);
      r.q[i] = normal(rng);
      break;
    case Data::specials:
      r.x[i] = bfloat16::from_bits(pick(rng, kSpecial16));
      r.dy[i] = bfloat16::from_bits(pick(rng, kSpecial16));
      for (auto* v : {&r.mean, &r.scale, &r.shift, &r.k, &r.p, &r.q}) {
        (*v)[i] = rng() % 2 ? pick(rng, kSpecial32) : normal(rng);
      }
      break;
  }
}

Inputs make_inputs(Data d, std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto s = static_cast<std::size_t>(n);
  Inputs r{std::vector<bfloat16>(s), std::vector<bfloat16>(s)};
  for (auto* v : {&r.mean, &r.scale, &r.shift, &r.k, &r.p, &r.q}) v->resize(s);
  for (std::size_t i = 0; i < s; ++i) fill_element(d, rng, r, i);
  return r;
}

// forward's and backward_dx's outputs (with kPad canaries after them, and `offset` elements
// before the run so the vectors are unaligned), as bit patterns.
std::vector<std::uint16_t> outputs(const Kernels<bfloat16>& k, const Inputs& r,
                                   std::int64_t offset) {
  const auto n = static_cast<std::int64_t>(r.x.size());
  const Coefficients c{r.mean.data(), r.scale.data(), r.shift.data(),
                       r.k.data(),    r.p.data(),     r.q.data()};
  const auto size = static_cast<std::size_t>(offset + n + kPad);
  std::vector<bfloat16> x(size), dy(size), y(size, bfloat16::from_bits(kCanary)), dx(y);
  std::copy(r.x.begin(), r.x.end(), x.begin() + offset);
  std::copy(r.dy.begin(), r.dy.end(), dy.begin() + offset);
  k.forward(x.data() + offset, n, c, y.data() + offset);
  k.backward_dx(dy.data() + offset, x.data() + offset, n, c, dx.data() + offset);
  std::vector<std::uint16_t> bits;
  for (const auto* v : {&y, &dx}) {
    for (const bfloat16 b : *v) bits.push_back(b.bits);
  }
  return bits;
}

bool is_nan16(std::uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

// True when two NaNs can meet in one operation of element i: a NaN input with another NaN or an
// infinity (inf - inf and 0 * inf make the default NaN). Which of the two NaNs an x86 operation
// returns depends on the operand order the compiler picked, and GCC's baseline copy itself picks
// differently in its vector body and its scalar tail (the same inputs give 0x7fc1 at element 0
// and 0xffc0 at element 27 of a 31-element run): there the result must be a NaN, not one payload.
bool nans_may_meet(const Inputs& r, std::size_t i) {
  int nans = 0, infinities = 0;
  auto count = [&](float v) {
    nans += std::isnan(v) ? 1 : 0;
    infinities += std::isinf(v) ? 1 : 0;
  };
  count(static_cast<float>(r.x[i]));
  count(static_cast<float>(r.dy[i]));
  for (const auto* v : {&r.mean, &r.scale, &r.shift, &r.k, &r.p, &r.q}) count((*v)[i]);
  return nans >= 1 && nans + infinities >= 2;
}

// The outputs bit for bit (canaries included), except that where two NaNs may meet both must be
// NaN.
void expect_identical(const std::vector<std::uint16_t>& want, const std::vector<std::uint16_t>& got,
                      const Inputs& r, std::int64_t offset, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  const std::size_t section = want.size() / 2, n = r.x.size();
  for (std::size_t j = 0; j < want.size(); ++j) {
    const std::size_t at = j % section;
    const bool in_run = at >= static_cast<std::size_t>(offset) && at - offset < n;
    if (want[j] != got[j] && in_run && nans_may_meet(r, at - offset)) {
      ASSERT_TRUE(is_nan16(want[j]) && is_nan16(got[j]))
          << what << " element " << j << ": " << want[j] << " vs " << got[j];
      continue;
    }
    ASSERT_EQ(want[j], got[j]) << what << " element " << j << " of " << want.size()
                               << " (forward's outputs, then backward_dx's)";
  }
}

std::vector<std::int64_t> lengths() {
  std::vector<std::int64_t> n;
  for (std::int64_t i = 1; i <= 100; ++i) n.push_back(i);
  for (std::int64_t i : {1000, 2047, 4099}) n.push_back(i);
  return n;
}

void compare_all(const std::string& context) {
  std::uint32_t seed = 1;
  for (const Act act : kActs) {
    const Kernels<bfloat16> base = baseline(act), fast = native(act);
    for (const Data d : {Data::random_bits, Data::boundaries, Data::tiny, Data::specials}) {
      for (const std::int64_t n : lengths()) {
        const Inputs r = make_inputs(d, n, seed++);
        for (const std::int64_t offset : {0, 3}) {
          const std::string what = context + name(act) + " data " +
                                   std::to_string(static_cast<int>(d)) + " n " + std::to_string(n) +
                                   " offset " + std::to_string(offset);
          const auto want = outputs(base, r, offset);
          ASSERT_NO_FATAL_FAILURE(
              expect_identical(want, outputs(fast, r, offset), r, offset, what));
        }
      }
    }
  }
}

TEST(NativeBf16BatchNormLoops, BitIdenticalToBaselineForEveryActivationAndLength) {
  MIXPREC_REQUIRE_NATIVE();
  compare_all("");
}

// With MXCSR.DAZ set vfpclassps cannot see subnormals: the loops must still round them as the
// integer formula does (both copies then also read subnormal inputs as zero, alike).
TEST(NativeBf16BatchNormLoops, BitIdenticalWithDenormalsAreZero) {
  MIXPREC_REQUIRE_NATIVE();
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x40u);
  compare_all("DAZ ");
  _mm_setcsr(csr);
}

// y may be x (and dx may be dy): every element is read before its vector is stored.
TEST(NativeBf16BatchNormLoops, InPlaceMatchesOutOfPlace) {
  MIXPREC_REQUIRE_NATIVE();
  for (const Act act : kNativeActs) {
    const Kernels<bfloat16> base = baseline(act), fast = native(act);
    const Inputs r = make_inputs(Data::random_bits, 1037, 99);
    const auto want = outputs(base, r, 0);
    const Coefficients c{r.mean.data(), r.scale.data(), r.shift.data(),
                         r.k.data(),    r.p.data(),     r.q.data()};
    const auto n = static_cast<std::int64_t>(r.x.size());
    std::vector<bfloat16> y = r.x, dx = r.dy;
    fast.forward(y.data(), n, c, y.data());
    fast.backward_dx(dx.data(), r.x.data(), n, c, dx.data());
    for (std::size_t i = 0; i < r.x.size(); ++i) {
      ASSERT_EQ(y[i].bits, want[i]) << name(act) << " forward " << i;
      ASSERT_EQ(dx[i].bits, want[i + r.x.size() + kPad]) << name(act) << " backward_dx " << i;
    }
  }
}

// kernels<bfloat16>() hands out the native loops for none/relu/relu6 on this CPU, not for sigmoid
// and silu, and not when the conversion ISA is limited below avx512_bf16 or the baseline forced.
TEST(NativeBf16BatchNormLoops, ChosenOnlyWhereTheCpuHasThem) {
  MIXPREC_REQUIRE_NATIVE();
  for (const Act act : kActs) {
    Kernels<bfloat16> replaced = baseline(act);
    const bool has = cpu::bn_kernels::use_native_bf16_stores(act, replaced);
    EXPECT_EQ(has, act == Act::none || act == Act::relu || act == Act::relu6) << name(act);
    const Kernels<bfloat16> chosen = cpu::bn_kernels::kernels<bfloat16>(act);
    EXPECT_EQ(chosen.forward == replaced.forward, has) << name(act);
    EXPECT_EQ(chosen.backward_dx == replaced.backward_dx, has) << name(act);
    const core::ConvertIsa before = core::set_convert_isa_limit(core::ConvertIsa::avx512);
    Kernels<bfloat16> limited = baseline(act);
    EXPECT_FALSE(cpu::bn_kernels::use_native_bf16_stores(act, limited)) << name(act);
    EXPECT_NE(cpu::bn_kernels::kernels<bfloat16>(act).forward, replaced.forward) << name(act);
    core::set_convert_isa_limit(before);
  }
}

}  // namespace
}  // namespace mixprec
