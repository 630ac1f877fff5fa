// The instruction-set switch behind mixprec::convert (core::set_convert_isa_limit), and on every
// path the CPU has (portable, AVX2, AVX-512, AVX512_BF16) float32 -> float16/bfloat16 against the
// reference conversions of convert_reference.h: every float32 exponent with edge and random
// mantissas, every bfloat16 subnormal rounding boundary, NaN classes, and a float32 subnormal in
// each lane of a block (vcvtne2ps2bf16 flushes subnormal inputs to zero; the AVX512_BF16 path must
// not). round_to_float16/round_to_bfloat16 get the same inputs. The exhaustive 16-bit -> float32
// checks and the length/offset checks run on every path in convert_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "convert_reference.h"
#include "core/convert_kernels.h"
#include "mixprec/convert.h"

namespace mixprec::core {
// gtest prints parameters through PrintTo found by argument-dependent lookup.
static void PrintTo(ConvertIsa isa, std::ostream* os) { *os << to_string(isa); }
}  // namespace mixprec::core

namespace mixprec {
namespace {

using namespace convert_reference;  // NOLINT(build/namespaces): the test vocabulary
using core::ConvertIsa;

constexpr ConvertIsa kAllIsas[] = {ConvertIsa::portable, ConvertIsa::avx2_f16c, ConvertIsa::avx512,
                                   ConvertIsa::avx512_bf16};

TEST(ConvertIsaLimit, ClampsToTheCpuAndRestores) {
  const ConvertIsa supported = core::convert_isa_supported();
  const ConvertIsa before = core::convert_isa();
  EXPECT_EQ(before, supported) << "no limit is set outside the tests that set one";
  for (const ConvertIsa isa : kAllIsas) {
    const ConvertIsa previous = core::set_convert_isa_limit(isa);
    EXPECT_EQ(core::convert_isa(), std::min(isa, supported)) << core::to_string(isa);
    EXPECT_EQ(core::set_convert_isa_limit(previous), std::min(isa, supported));
    EXPECT_EQ(core::convert_isa(), previous);
  }
  EXPECT_EQ(core::convert_isa(), before);
  EXPECT_EQ(core::cpu_has_f16c_avx2(), supported >= ConvertIsa::avx2_f16c);
  std::set<std::string> names;
  for (const ConvertIsa isa : kAllIsas) names.insert(core::to_string(isa));
  EXPECT_EQ(names.size(), 4u);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
TEST(ConvertIsaLimit, DetectionMatchesTheCpuFlags) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2");
  const ConvertIsa supported = core::convert_isa_supported();
  EXPECT_EQ(supported >= ConvertIsa::avx512, avx512);
  EXPECT_EQ(supported == ConvertIsa::avx512_bf16,
            avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512dq"));
}
#endif

// Runs each test with mixprec::convert limited to one instruction set; skipped where the CPU
// lacks it.
class ConvertEveryPath : public ::testing::TestWithParam<ConvertIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > core::convert_isa_supported()) {
      GTEST_SKIP() << "this CPU lacks " << core::to_string(GetParam());
    }
    previous_ = core::set_convert_isa_limit(GetParam());
  }
  void TearDown() override { core::set_convert_isa_limit(previous_); }

  // Converts `in` to float16 and bfloat16, and rounds it to both in float32, checking every
  // result against the reference. Reports the first few mismatches of each kind.
  static void check_all(const std::vector<float>& in, const std::string& what) {
    const std::size_t n = in.size();
    std::vector<float16> half(n);
    std::vector<bfloat16> bf(n);
    std::vector<float> round16(n), round_bf(n);
    convert(in.data(), half.data(), n);
    convert(in.data(), bf.data(), n);
    round_to_float16(in.data(), round16.data(), n);
    round_to_bfloat16(in.data(), round_bf.data(), n);
    int failures = 0;
    for (std::size_t i = 0; i < n && failures < 10; ++i) {
      const uint16_t want_half = ref_float_to_half(in[i]);
      const uint16_t want_bf = ref_float_to_bf16(in[i]);
      const bool ok = half[i].bits == want_half && bf[i].bits == want_bf &&
                      to_bits(round16[i]) == ref_half_to_float_bits(want_half) &&
                      to_bits(round_bf[i]) == ref_bf16_to_float_bits(want_bf);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << what << ": input " << hex(to_bits(in[i]), 8) << " at " << i << ": float16 "
                      << hex(half[i].bits, 4) << " (want " << hex(want_half, 4) << "), bfloat16 "
                      << hex(bf[i].bits, 4) << " (want " << hex(want_bf, 4) << "), rounded "
                      << hex(to_bits(round16[i]), 8) << " / " << hex(to_bits(round_bf[i]), 8);
      }
    }
  }

 private:
  ConvertIsa previous_ = core::convert_isa();
};

INSTANTIATE_TEST_SUITE_P(Isas, ConvertEveryPath, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<ConvertIsa>& info) {
                           return std::string(core::to_string(info.param));
                         });

// Mantissas at the rounding boundaries of bfloat16 (bit 16) and float16 (bit 13), the extremes,
// and the quiet bit.
const uint32_t kEdgeMantissas[] = {
    0x000000, 0x000001, 0x000002, 0x000fff, 0x001000, 0x001001, 0x002fff, 0x003000, 0x003001,
    0x007fff, 0x008000, 0x008001, 0x00ffff, 0x010000, 0x017fff, 0x018000, 0x018001, 0x3fffff,
    0x400000, 0x400001, 0x7f7fff, 0x7f8000, 0x7f8001, 0x7fe000, 0x7ff000, 0x7ffffe, 0x7fffff};

TEST_P(ConvertEveryPath, EveryExponentWithEdgeAndRandomMantissas) {
  std::mt19937 gen(0x5eed0010u);
  std::vector<float> in;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exponent = 0; exponent < 256; ++exponent) {
      const uint32_t top = (sign << 31) | (exponent << 23);
      for (const uint32_t m : kEdgeMantissas) in.push_back(from_bits(top | m));
      for (int r = 0; r < 200; ++r) in.push_back(from_bits(top | (gen() & 0x7fffffu)));
    }
  }
  EXPECT_EQ(in.size(), 2u * 256u * (std::size(kEdgeMantissas) + 200u));
  check_all(in, "every exponent");
}

TEST_P(ConvertEveryPath, BFloat16SubnormalRoundingBoundaries) {
  // Every float32 subnormal whose low 16 bits sit at or next to a bfloat16 rounding boundary
  // (ties at 0x8000, ties to even up or down, carries into the next bfloat16 and into FLT_MIN).
  std::vector<float> in;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t high = 0; high < 0x80; ++high) {
      for (const uint32_t low : {0x0000u, 0x0001u, 0x7ffeu, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
        in.push_back(from_bits((sign << 31) | (high << 16) | low));
      }
    }
  }
  check_all(in, "bfloat16 subnormal boundaries");
  // A few results spelled out: a subnormal must not be flushed to zero.
  const float spot[] = {from_bits(0x00008001u), from_bits(0x00018000u), from_bits(0x007fffffu),
                        from_bits(0x80400000u)};
  bfloat16 out[4];
  convert(spot, out, 4);
  EXPECT_EQ(out[0].bits, 0x0001);
  EXPECT_EQ(out[1].bits, 0x0002);
  EXPECT_EQ(out[2].bits, 0x0080);
  EXPECT_EQ(out[3].bits, 0x8040);
}

// Normal values, ties, NaNs and infinities: a block the AVX512_BF16 path converts with
// vcvtne2ps2bf16 unless a subnormal is put in.
std::vector<float> normal_block(std::size_t n, std::mt19937& gen) {
  const uint32_t specials[] = {0x7f800001u, 0xffc00000u, 0x7f800000u, 0x3f808000u,
                               0x3f818000u, 0x7f7f8000u, 0x00000000u, 0x80800000u};
  std::vector<float> block(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t r = gen();
    block[i] = (i % 5 == 0) ? from_bits(specials[r % 8])
                            : from_bits((r & 0x807fffffu) | ((1u + (r >> 23) % 254u) << 23));
  }
  return block;
}

TEST_P(ConvertEveryPath, SubnormalInEachLane) {
  std::mt19937 gen(0x5eed0011u);
  const std::vector<float> base = normal_block(64, gen);
  for (std::size_t lane = 0; lane < 64; ++lane) {
    std::vector<float> block = base;
    block[lane] = from_bits(0x00008001u | ((gen() & 1u) << 31) | ((gen() & 0x7fu) << 16));
    check_all(block, "one subnormal in lane " + std::to_string(lane) + " of 64");
    // The same block cut after the subnormal: it falls in the masked tail.
    block.resize(lane + 1);
    check_all(block, "subnormal last of " + std::to_string(lane + 1));
  }
  // Blocks of only subnormals, and subnormals with NaNs in the same vector.
  std::vector<float> mixed(96);
  for (std::size_t i = 0; i < mixed.size(); ++i) {
    const uint32_t r = gen();
    const uint32_t subnormal = (r & 0x807fffffu) | 1u;
    mixed[i] = from_bits(i < 32 || i % 2 == 0 ? subnormal : (0x7f800001u | (r & 0x807fffffu)));
  }
  check_all(mixed, "subnormals and NaNs");
}

TEST_P(ConvertEveryPath, NanClasses) {
  // Signalling and quiet NaNs, both signs, with single payload bits, the bits each 16-bit format
  // keeps, the bits it drops, and all bits; long enough for the vector loops, then alone.
  std::vector<uint32_t> nans;
  for (const uint32_t quiet : {0u, 0x400000u}) {
    for (int bit = 0; bit < 22; ++bit) nans.push_back(quiet | (1u << bit));
    for (const uint32_t payload : {0x3fffffu, 0x3f0000u, 0x00ffffu, 0x3fe000u, 0x001fffu}) {
      nans.push_back(quiet | payload);
    }
  }
  nans.push_back(0x400000u);
  std::vector<float> in;
  for (const uint32_t sign : {0u, 0x80000000u}) {
    for (const uint32_t p : nans) in.push_back(from_bits(sign | 0x7f800000u | p));
  }
  check_all(in, "NaNs");
  std::vector<bfloat16> bf(in.size());
  std::vector<float16> half(in.size());
  convert(in.data(), bf.data(), in.size());
  convert(in.data(), half.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const uint32_t x = to_bits(in[i]);
    // bfloat16: sign, exponent and the top 6 payload bits kept, quiet bit set.
    EXPECT_EQ(bf[i].bits, (x >> 16) | 0x0040u) << hex(x, 8);
    // float16: sign and the top 9 payload bits kept, quiet bit set.
    EXPECT_EQ(half[i].bits, ((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x01ffu)) << hex(x, 8);
  }
  for (const float f : in) check_all({f}, "one NaN alone");
}

// Where the destination starts relative to a 64-byte line decides how many values the AVX-512
// kernels convert (masked) before their aligned main loop: every start within a line, lengths
// around the head, main loop and tail sizes, nothing written outside [0, n).
template <typename Src, typename Dst, typename Want>
void check_every_destination_start(const std::vector<Src>& src, Want want, const char* what) {
  constexpr std::size_t kLine = 64 / sizeof(Dst);
  const uint32_t sentinel = 0x5a5a5a5au;
  for (std::size_t start = 0; start < kLine; ++start) {
    for (const std::size_t n : {1, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 97, 200}) {
      std::vector<uint32_t> raw((kLine + n) * sizeof(Dst) / 4 + 40, sentinel);
      auto* const base = reinterpret_cast<unsigned char*>(raw.data());
      Dst* const line =
          reinterpret_cast<Dst*>(base + (64 - reinterpret_cast<std::uintptr_t>(base) % 64) % 64);
      convert(src.data(), line + start, n);
      for (std::size_t i = 0; i < start + n + 8; ++i) {
        uint32_t got = 0;
        std::memcpy(&got, line + i, sizeof(Dst));
        const uint32_t expected = (i < start || i >= start + n)
                                      ? sentinel & (sizeof(Dst) == 2 ? 0xffffu : ~0u)
                                      : want(src[i - start]);
        ASSERT_EQ(got, expected) << what << ": start " << start << " n " << n << " i " << i;
      }
    }
  }
}

TEST_P(ConvertEveryPath, EveryDestinationStartInALine) {
  std::mt19937 gen(0x5eed0013u);
  std::vector<float> floats = normal_block(200, gen);
  for (std::size_t i = 7; i < floats.size(); i += 29) floats[i] = from_bits(0x00018000u);
  std::vector<float16> halves(200);
  std::vector<bfloat16> bfs(200);
  for (std::size_t i = 0; i < 200; ++i) {
    halves[i] = float16::from_bits(static_cast<uint16_t>(gen()));
    bfs[i] = bfloat16::from_bits(static_cast<uint16_t>(gen()));
  }
  check_every_destination_start<float, float16>(
      floats, [](float f) { return uint32_t{ref_float_to_half(f)}; }, "float -> float16");
  check_every_destination_start<float, bfloat16>(
      floats, [](float f) { return uint32_t{ref_float_to_bf16(f)}; }, "float -> bfloat16");
  check_every_destination_start<float16, float>(
      halves, [](float16 h) { return ref_half_to_float_bits(h.bits); }, "float16 -> float");
  check_every_destination_start<bfloat16, float>(
      bfs, [](bfloat16 b) { return ref_bf16_to_float_bits(b.bits); }, "bfloat16 -> float");
}

#if defined(__x86_64__) || defined(__i386__)
TEST_P(ConvertEveryPath, DenormalsAreZeroModeChangesNothing) {
  // MXCSR.DAZ/FTZ (set by some numerical libraries for speed) must not change any result: the
  // conversions are defined on bit patterns. Expected values are computed before setting them (the
  // double-arithmetic reference itself would read subnormals as zero).
  std::mt19937 gen(0x5eed0012u);
  std::vector<float> in = normal_block(4096, gen);
  for (std::size_t i = 0; i < in.size(); i += 3) {
    in[i] = from_bits((gen() & 0x807fffffu) | 1u);  // subnormal in every vector
  }
  std::vector<uint16_t> want_half(in.size()), want_bf(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    want_half[i] = ref_float_to_half(in[i]);
    want_bf[i] = ref_float_to_bf16(in[i]);
  }
  std::vector<float16> half(in.size());
  std::vector<bfloat16> bf(in.size());
  std::vector<float> round_bf(in.size());
  const unsigned mxcsr = _mm_getcsr();
  _mm_setcsr(mxcsr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  convert(in.data(), half.data(), in.size());
  convert(in.data(), bf.data(), in.size());
  round_to_bfloat16(in.data(), round_bf.data(), in.size());
  _mm_setcsr(mxcsr);
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(half[i].bits, want_half[i]) << hex(to_bits(in[i]), 8);
    ASSERT_EQ(bf[i].bits, want_bf[i]) << hex(to_bits(in[i]), 8);
    ASSERT_EQ(to_bits(round_bf[i]), ref_bf16_to_float_bits(want_bf[i])) << hex(to_bits(in[i]), 8);
  }
}
#endif

}  // namespace
}  // namespace mixprec
