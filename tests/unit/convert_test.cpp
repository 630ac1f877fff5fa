// float32 <-> float16/bfloat16 conversion: the scalar host types (float16.h, bfloat16.h), the
// portable bulk loop, the F16C/AVX2 bulk kernels and the public mixprec::convert on every path the
// CPU has (portable, AVX2, AVX-512, AVX512_BF16: core::set_convert_isa_limit), each against the
// reference conversions of convert_reference.h (double arithmetic, not the bit tricks under test).
//
// NaN convention checked throughout (IEEE 754 leaves the payload to the implementation; this is
// what x86 F16C does and what the library documents):
//   float32 -> float16/bfloat16: sign kept, top payload bits kept, quiet bit forced on.
//   float16 -> float32: payload kept, quiet bit forced on (signalling NaNs are quieted).
//   bfloat16 -> float32: exact 16-bit widening (bit pattern << 16).
#include "mixprec/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "convert_reference.h"
#include "core/convert_kernels.h"
#include "mixprec/error.h"

namespace mixprec {
namespace {

using namespace convert_reference;  // NOLINT(build/namespaces): the test vocabulary
using std::uint16_t;
using std::uint32_t;

// The implementations under test: the scalar conversions, the portable loop and the AVX2 kernels
// called directly, and mixprec::convert with its path limited to each instruction set (kPublic:
// no limit, the newest one the CPU has).
enum class Path {
  kScalar,
  kPortable,
  kSimd,
  kPublicPortable,
  kPublicAvx2,
  kPublicAvx512,
  kPublicAvx512Bf16,
  kPublic
};

const char* to_string(Path path) {
  switch (path) {
    case Path::kScalar: return "Scalar";
    case Path::kPortable: return "Portable";
    case Path::kSimd: return "Simd";
    case Path::kPublicPortable: return "PublicPortable";
    case Path::kPublicAvx2: return "PublicAvx2";
    case Path::kPublicAvx512: return "PublicAvx512";
    case Path::kPublicAvx512Bf16: return "PublicAvx512Bf16";
    case Path::kPublic: return "Public";
  }
  return "Unknown";
}

// The instruction set a kPublic* path limits mixprec::convert to.
core::ConvertIsa isa_of(Path path) {
  switch (path) {
    case Path::kPublicPortable: return core::ConvertIsa::portable;
    case Path::kPublicAvx2: return core::ConvertIsa::avx2_f16c;
    case Path::kPublicAvx512: return core::ConvertIsa::avx512;
    default: return core::ConvertIsa::avx512_bf16;
  }
}

void PrintTo(Path path, std::ostream* os) { *os << to_string(path); }

std::string path_name(const ::testing::TestParamInfo<Path>& info) { return to_string(info.param); }

template <typename Src, typename Dst>
void run_path(Path path, const Src* src, Dst* dst, std::size_t n) {
  switch (path) {
    case Path::kScalar:
      for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
      break;
    case Path::kPortable: core::convert_portable(src, dst, n); break;
    case Path::kSimd: core::convert_simd(src, dst, n); break;
    default: convert(src, dst, n); break;  // kPublic*: the limit is set by the fixture
  }
}

// Collects mismatches and reports the first few, so loops over millions of values stay fast.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  ~Mismatches() { EXPECT_EQ(count_, 0) << what_ << ": " << count_ << " mismatches"; }
  void add(uint32_t input, int input_width, uint32_t got, uint32_t want, int output_width) {
    if (++count_ <= 10) {
      ADD_FAILURE() << what_ << ": input " << hex(input, input_width) << " gave "
                    << hex(got, output_width) << ", expected " << hex(want, output_width);
    }
  }

 private:
  std::string what_;
  long long count_ = 0;
};

class ConvertTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    if (GetParam() == Path::kSimd && !core::cpu_has_f16c_avx2()) {
      GTEST_SKIP() << "this CPU lacks AVX2/F16C; the SIMD kernels cannot run here";
    }
    const core::ConvertIsa isa = isa_of(GetParam());
    if (GetParam() != Path::kPublic && isa > core::convert_isa_supported()) {
      GTEST_SKIP() << "this CPU lacks " << core::to_string(isa);
    }
    previous_ = core::set_convert_isa_limit(isa);
    ASSERT_EQ(core::convert_isa(), std::min(isa, core::convert_isa_supported()));
  }
  void TearDown() override { core::set_convert_isa_limit(previous_); }

  // Converts `in` to float16 with the path under test and checks every result.
  void check_to_half(const std::vector<float>& in, const std::string& what) {
    std::vector<float16> out(in.size());
    run_path(GetParam(), in.data(), out.data(), in.size());
    Mismatches bad(what);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = ref_float_to_half(in[i]);
      if (out[i].bits != want) bad.add(to_bits(in[i]), 8, out[i].bits, want, 4);
    }
  }

  void check_to_bf16(const std::vector<float>& in, const std::string& what) {
    std::vector<bfloat16> out(in.size());
    run_path(GetParam(), in.data(), out.data(), in.size());
    Mismatches bad(what);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = ref_float_to_bf16(in[i]);
      if (out[i].bits != want) bad.add(to_bits(in[i]), 8, out[i].bits, want, 4);
    }
  }

  core::ConvertIsa previous_ = core::convert_isa();

  // Expected 16-bit results spelled out by hand: these pin down the reference itself.
  template <typename T>
  void expect_exact(const std::vector<std::pair<uint32_t, uint16_t>>& cases) {
    std::vector<float> in;
    for (const auto& c : cases) in.push_back(from_bits(c.first));
    std::vector<T> out(in.size());
    run_path(GetParam(), in.data(), out.data(), in.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(out[i].bits, cases[i].second)
          << "input " << hex(cases[i].first, 8) << " (" << in[i] << ")";
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Paths, ConvertTest,
                         ::testing::Values(Path::kScalar, Path::kPortable, Path::kSimd,
                                           Path::kPublicPortable, Path::kPublicAvx2,
                                           Path::kPublicAvx512, Path::kPublicAvx512Bf16,
                                           Path::kPublic),
                         path_name);

std::vector<float16> all_half_patterns() {
  std::vector<float16> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = float16::from_bits(static_cast<uint16_t>(h));
  return all;
}

// Value of a finite non-negative half pattern, in double.
double half_value(uint16_t h) { return static_cast<double>(from_bits(ref_half_to_float_bits(h))); }

// ---------------------------------------------------------------------------------------------
// float16 -> float32

TEST_P(ConvertTest, HalfToFloatAllPatternsExact) {
  const std::vector<float16> in = all_half_patterns();
  std::vector<float> out(in.size());
  run_path(GetParam(), in.data(), out.data(), in.size());
  Mismatches bad("half -> float");
  int nans = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t got = to_bits(out[h]);
    const uint32_t want = ref_half_to_float_bits(static_cast<uint16_t>(h));
    if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0) {
      // NaN: must be a NaN with the same sign and the payload in the top fraction bits, quiet.
      ++nans;
      if (!std::isnan(out[h]) || (got & 0x00400000u) == 0 || got != want)
        bad.add(h, 4, got, want, 8);
    } else if (got != want) {
      bad.add(h, 4, got, want, 8);
    }
  }
  EXPECT_EQ(nans, 2 * 1023);
}

TEST_P(ConvertTest, HalfRoundTripAllPatterns) {
  const std::vector<float16> in = all_half_patterns();
  std::vector<float> wide(in.size());
  std::vector<float16> back(in.size());
  run_path(GetParam(), in.data(), wide.data(), in.size());
  run_path(GetParam(), wide.data(), back.data(), wide.size());
  Mismatches bad("half -> float -> half");
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    // Non-NaN patterns come back unchanged; a NaN comes back with its payload, made quiet.
    const uint32_t want = is_nan ? (h | 0x200u) : h;
    if (back[h].bits != want) bad.add(h, 4, back[h].bits, want, 4);
  }
}

TEST_P(ConvertTest, HalfToFloatSpotValues) {
  const std::vector<std::pair<uint16_t, float>> cases = {{0x0000, 0.0f},
                                                         {0x8000, -0.0f},
                                                         {0x3c00, 1.0f},
                                                         {0xc000, -2.0f},
                                                         {0x7bff, 65504.0f},
                                                         {0x0400, 6.103515625e-05f},
                                                         {0x0001, 5.96046448e-08f},
                                                         {0x03ff, 6.09755516e-05f},
                                                         {0x3555, 0.333251953f}};
  for (const auto& [h, value] : cases) {
    const float16 in = float16::from_bits(h);
    float out = 0;
    run_path(GetParam(), &in, &out, 1);
    EXPECT_EQ(to_bits(out), to_bits(value)) << hex(h, 4);
  }
  const uint16_t inf_nan[] = {0x7c00, 0xfc00, 0x7c01, 0xfe00};
  float out[4];
  std::vector<float16> in;
  for (uint16_t h : inf_nan) in.push_back(float16::from_bits(h));
  run_path(GetParam(), in.data(), out, 4);
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_bits(out[2]), 0x7fc02000u) << "signalling NaN must come out quiet";
  EXPECT_EQ(to_bits(out[3]), 0xffc00000u);
}

// ---------------------------------------------------------------------------------------------
// float32 -> float16

TEST_P(ConvertTest, FloatToHalfSpotValues) {
  expect_exact<float16>({
      {to_bits(1.0f), 0x3c00},
      {to_bits(1.0f + 0x1p-11f), 0x3c00},             // tie between 1 and 1+2^-10: even (down)
      {to_bits(1.0f + 3 * 0x1p-11f), 0x3c02},         // tie: even (up)
      {to_bits(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01},  // just above the tie: up
      {to_bits(65504.0f), 0x7bff},
      {to_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff},  // just below the overflow threshold
      {to_bits(65520.0f), 0x7c00},                        // tie with 2^16: even, i.e. inf
      {to_bits(-65520.0f), 0xfc00},
      {to_bits(65536.0f), 0x7c00},
      {to_bits(FLT_MAX), 0x7c00},
      {to_bits(0x1p-24f), 0x0001},  // smallest subnormal
      {to_bits(0x1p-25f), 0x0000},  // tie with 0: even (0)
      {to_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001},
      {to_bits(3 * 0x1p-25f), 0x0002},         // tie between 1 and 2 ulp: even (2)
      {to_bits(-5 * 0x1p-25f), 0x8002},        // tie between 2 and 3 ulp: even (2)
      {to_bits(0x1p-14f - 0x1p-25f), 0x0400},  // tie between 0x03ff and 0x0400: even
      {to_bits(0x1p-14f), 0x0400},             // smallest normal
      {to_bits(FLT_TRUE_MIN), 0x0000},
      {to_bits(-FLT_TRUE_MIN), 0x8000},
      {to_bits(FLT_MIN), 0x0000},
      {0x00000000u, 0x0000},
      {0x80000000u, 0x8000},
      {0x7f800000u, 0x7c00},
      {0xff800000u, 0xfc00},
  });
}

TEST_P(ConvertTest, FloatToHalfEveryHalfValueAndMidpoints) {
  std::vector<float> in;
  in.reserve(8 * 0x7c00);
  for (uint16_t h = 0; h < 0x7c00; ++h) {
    const double lo = half_value(h);
    // The next value up; past 65504 (0x7bff) the grid continues with 2^16, which rounds to inf.
    const double hi = h + 1 < 0x7c00 ? half_value(static_cast<uint16_t>(h + 1)) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);  // 12 significant bits: exact in float
    EXPECT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    for (const float v :
         {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      in.push_back(v);
      in.push_back(-v);
    }
  }
  check_to_half(in, "every half value and midpoint");
}

TEST_P(ConvertTest, FloatToHalfSubnormalRange) {
  // Every float below 2^-14 (the smallest normal half) with a stride, both signs. The rounding
  // boundaries of the subnormal grid themselves are covered by the midpoint test above.
  std::vector<float> in;
  for (uint32_t x = 0; x < 0x38800000u; x += 997) {
    in.push_back(from_bits(x));
    in.push_back(from_bits(x | 0x80000000u));
  }
  // Dense samples (every 3rd / 5th float) of [2^-25, 2^-24], which rounds to 0 or the smallest
  // subnormal, and of the top binade [2^-15, 2^-14), where the subnormal grid meets the normal one.
  for (uint32_t x = to_bits(0x1p-25f); x <= to_bits(0x1p-24f); x += 3) in.push_back(from_bits(x));
  for (uint32_t x = to_bits(0x1p-15f); x < to_bits(0x1p-14f); x += 5) in.push_back(from_bits(x));
  check_to_half(in, "subnormal range");
}

TEST_P(ConvertTest, FloatToHalfOverflowBoundary) {
  std::vector<float> in;
  for (const float centre : {65504.0f, 65520.0f, 65536.0f, 32768.0f}) {
    const uint32_t c = to_bits(centre);
    for (uint32_t x = c - 4096; x <= c + 4096; ++x) {
      in.push_back(from_bits(x));
      in.push_back(-from_bits(x));
    }
  }
  check_to_half(in, "around 65504/65520");
}

// NaNs with assorted payloads: quiet and signalling, payload only in the bits float16 drops.
std::vector<uint32_t> nan_patterns() {
  std::vector<uint32_t> nans = {0x7f800001u, 0x7f801fffu, 0x7f802000u, 0x7fa5a5a5u, 0x7fbfffffu,
                                0x7fc00000u, 0x7fc00001u, 0x7fd55555u, 0x7fffe000u, 0x7fffffffu};
  for (uint32_t p = 1; p < 0x800000u; p += 4099) nans.push_back(0x7f800000u | p);
  const std::size_t n = nans.size();
  for (std::size_t i = 0; i < n; ++i) nans.push_back(nans[i] | 0x80000000u);
  return nans;
}

TEST_P(ConvertTest, FloatToHalfSpecials) {
  std::vector<float> in;
  for (uint32_t x : nan_patterns()) in.push_back(from_bits(x));
  std::vector<float16> out(in.size());
  run_path(GetParam(), in.data(), out.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const uint32_t x = to_bits(in[i]);
    const uint16_t h = out[i].bits;
    ASSERT_EQ(h & 0x7c00u, 0x7c00u) << hex(x, 8);
    ASSERT_NE(h & 0x03ffu, 0u) << "NaN " << hex(x, 8) << " became inf";
    ASSERT_NE(h & 0x0200u, 0u) << "NaN " << hex(x, 8) << " is not quiet";
    ASSERT_EQ(h >> 15, x >> 31) << "sign of NaN " << hex(x, 8);
  }
  check_to_half(in, "NaNs");
  expect_exact<float16>({{0x7f800001u, 0x7e00},
                         {0x7f801fffu, 0x7e00},
                         {0xff802000u, 0xfe01},
                         {0x7fffffffu, 0x7fff},
                         {0x7fa5a5a5u, 0x7f2d}});
}

// Fixed-seed uniformly random float32 bit patterns (two per 64-bit draw), checked in blocks.
template <typename Check>
void for_random_blocks(std::uint64_t seed, std::size_t total, bool in_range, Check check) {
  std::mt19937_64 gen(seed);
  constexpr std::size_t kBlock = 1 << 16;
  std::vector<float> block(kBlock);
  for (std::size_t done = 0; done < total; done += kBlock) {
    for (std::size_t i = 0; i < kBlock; i += 2) {
      const std::uint64_t r = gen();
      uint32_t a = static_cast<uint32_t>(r);
      uint32_t b = static_cast<uint32_t>(r >> 32);
      if (in_range) {
        // Exponent field in [102, 143], i.e. |x| in [2^-25, 2^17): the interesting part of the
        // float16 range, where uniform bit patterns land only ~16% of the time.
        a = (a & 0x807fffffu) | ((102u + (a >> 23 & 0xffu) % 42u) << 23);
        b = (b & 0x807fffffu) | ((102u + (b >> 23 & 0xffu) % 42u) << 23);
      }
      block[i] = from_bits(a);
      block[i + 1] = from_bits(b);
    }
    check(block);
  }
}

TEST_P(ConvertTest, FloatToHalfRandom) {
  std::size_t checked = 0;
  for_random_blocks(0x5eed0001u, 10'000'000, false, [&](const std::vector<float>& block) {
    check_to_half(block, "random float32 bits");
    checked += block.size();
  });
  for_random_blocks(0x5eed0002u, 4'000'000, true, [&](const std::vector<float>& block) {
    check_to_half(block, "random float32 in the float16 range");
    checked += block.size();
  });
  EXPECT_GE(checked, 14'000'000u);
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TEST_P(ConvertTest, BFloat16ToFloatAllPatternsExact) {
  std::vector<bfloat16> in(65536);
  for (uint32_t b = 0; b < 65536; ++b) in[b] = bfloat16::from_bits(static_cast<uint16_t>(b));
  std::vector<float> out(in.size());
  run_path(GetParam(), in.data(), out.data(), in.size());
  Mismatches bad("bfloat16 -> float");
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint32_t want = ref_bf16_to_float_bits(static_cast<uint16_t>(b));
    if (to_bits(out[b]) != want) bad.add(b, 4, to_bits(out[b]), want, 8);
  }
  // Spot values independent of the reference decoder.
  EXPECT_EQ(out[0x3f80], 1.0f);
  EXPECT_EQ(out[0xc040], -3.0f);
  EXPECT_EQ(out[0x0001], 0x1p-133f);
  EXPECT_EQ(out[0x7f7f], 0x1.fep127f);
}

TEST_P(ConvertTest, FloatToBFloat16EdgeCases) {
  expect_exact<bfloat16>({
      {to_bits(1.0f), 0x3f80},         {0x3f808000u, 0x3f80},  // 1 + 2^-8: tie, even (down)
      {0x3f818000u, 0x3f82},                                   // 1 + 3*2^-8: tie, even (up)
      {0x3f808001u, 0x3f81},                                   // just above the tie
      {0x3f807fffu, 0x3f80},                                   // just below the tie
      {to_bits(FLT_MAX), 0x7f80},                              // rounds up into inf
      {to_bits(-FLT_MAX), 0xff80},     {0x7f7f7fffu, 0x7f7f},  // largest value that stays finite
      {0x7f7f8000u, 0x7f80},  // tie above the largest finite: even is inf
      {0x7f7effffu, 0x7f7f},           {to_bits(FLT_MIN), 0x0080},
      {to_bits(FLT_TRUE_MIN), 0x0000},  // denormal min: far below half a bfloat16 ulp
      {0x00008000u, 0x0000},            // tie at the subnormal ulp: even (0)
      {0x00008001u, 0x0001},           {0x00018000u, 0x0002},  // tie: even (up)
      {0x007fffffu, 0x0080},  // largest subnormal rounds up to FLT_MIN
      {0x80000000u, 0x8000},           {0x00000000u, 0x0000},
      {0x7f800000u, 0x7f80},           {0xff800000u, 0xff80},
      {0x7f800001u, 0x7fc0},  // signalling NaN becomes quiet, not inf
      {0xff800001u, 0xffc0},           {0x7fc00000u, 0x7fc0},
      {0x7fffffffu, 0x7fff},  // must not carry out of the NaN
      {0x7fbfffffu, 0x7fff},
  });
  std::vector<float> in;
  for (uint32_t x : nan_patterns()) in.push_back(from_bits(x));
  std::vector<bfloat16> out(in.size());
  run_path(GetParam(), in.data(), out.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const uint16_t b = out[i].bits;
    ASSERT_EQ(b & 0x7fc0u, 0x7fc0u) << "NaN " << hex(to_bits(in[i]), 8) << " must stay a quiet NaN";
    ASSERT_EQ(b >> 15, to_bits(in[i]) >> 31);
  }
  check_to_bf16(in, "NaNs");
  // Neighbourhoods of the overflow threshold, ties, and subnormals.
  in.clear();
  for (const uint32_t c : {0x7f7f8000u, 0x3f808000u, 0x00008000u, 0x00800000u, 0x007f8000u}) {
    for (uint32_t x = c - 2048; x <= c + 2048; ++x) {
      in.push_back(from_bits(x));
      in.push_back(from_bits(x | 0x80000000u));
    }
  }
  check_to_bf16(in, "bfloat16 boundaries");
}

TEST_P(ConvertTest, FloatToBFloat16Random) {
  std::size_t checked = 0;
  for_random_blocks(0x5eed0003u, 10'000'000, false, [&](const std::vector<float>& block) {
    check_to_bf16(block, "random float32 bits");
    checked += block.size();
  });
  EXPECT_GE(checked, 10'000'000u);
}

// ---------------------------------------------------------------------------------------------
// Bulk lengths and alignment: every length up to 70 (the 8/16/32/64-wide loops and the masked
// tails) and a few longer ones, at element offsets 0..3 into the buffers, against the scalar
// conversion; nothing outside [0, n) is written.

std::vector<std::size_t> bulk_lengths() {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 70; ++n) lengths.push_back(n);
  for (const std::size_t n : {127, 128, 129, 1000, 1024, 1025}) lengths.push_back(n);
  return lengths;
}

template <typename Src, typename Dst, typename MakeSrc, typename Scalar>
void check_lengths(Path path, MakeSrc make_src, Scalar scalar, const char* what) {
  std::mt19937_64 gen(0x5eed0004u);
  constexpr std::size_t kGuard = 40;
  const Dst sentinel = Dst::from_bits(0x5a5a);
  for (const std::size_t n : bulk_lengths()) {
    for (std::size_t offset = 0; offset < 4; ++offset) {
      std::vector<Src> src(offset + n);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = make_src(gen);
      std::vector<Dst> dst(offset + n + kGuard, sentinel);
      run_path(path, src.data() + offset, dst.data() + offset, n);
      for (std::size_t i = 0; i < dst.size(); ++i) {
        if (i < offset || i >= offset + n) {
          ASSERT_EQ(dst[i].bits, sentinel.bits) << what << ": wrote outside, n " << n << " i " << i;
        } else {
          ASSERT_EQ(dst[i].bits, scalar(src[i]))
              << what << ": n " << n << " offset " << offset << " i " << i;
        }
      }
    }
  }
}

template <typename Src, typename Scalar>
void check_lengths_to_float(Path path, Scalar scalar, const char* what) {
  std::mt19937_64 gen(0x5eed0005u);
  constexpr std::size_t kGuard = 40;
  const uint32_t sentinel = 0x5a5a5a5au;
  for (const std::size_t n : bulk_lengths()) {
    for (std::size_t offset = 0; offset < 4; ++offset) {
      std::vector<Src> src(offset + n);
      for (auto& s : src) s = Src::from_bits(static_cast<uint16_t>(gen()));
      std::vector<float> dst(offset + n + kGuard, from_bits(sentinel));
      run_path(path, src.data() + offset, dst.data() + offset, n);
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const uint32_t want = (i < offset || i >= offset + n) ? sentinel : scalar(src[i].bits);
        ASSERT_EQ(to_bits(dst[i]), want)
            << what << ": n " << n << " offset " << offset << " i " << i;
      }
    }
  }
}

// Random bits, with one value in eight replaced by a special (NaN, inf, tie, subnormal).
float random_float(std::mt19937_64& gen) {
  static const uint32_t specials[] = {0x7f800001u, 0xffc00000u, 0x7f800000u, 0x477ff000u,
                                      0x3f808000u, 0x33000000u, 0x00000001u, 0x80000000u};
  const std::uint64_t r = gen();
  if ((r & 7) == 0) return from_bits(specials[(r >> 3) & 7]);
  return from_bits(static_cast<uint32_t>(r >> 32));
}

TEST_P(ConvertTest, BulkLengthsAndOffsets) {
  check_lengths<float, float16>(
      GetParam(), random_float, [](float f) { return detail::float_to_half_bits(f); },
      "float -> float16");
  check_lengths<float, bfloat16>(
      GetParam(), random_float, [](float f) { return detail::float_to_bfloat16_bits(f); },
      "float -> bfloat16");
  check_lengths_to_float<float16>(
      GetParam(), [](uint16_t h) { return to_bits(detail::half_bits_to_float(h)); },
      "float16 -> float");
  check_lengths_to_float<bfloat16>(
      GetParam(), [](uint16_t b) { return to_bits(detail::bfloat16_bits_to_float(b)); },
      "bfloat16 -> float");
}

// round_to_float16/bfloat16 (float32 values rounded to the 16-bit format, kept in float32) against
// the reference conversion there and back, on every path the CPU has, out of place (64-byte aligned
// and not, odd lengths: the streaming-store paths and the tails) and in place, on random values,
// specials and every float16 value's neighbourhood.
void check_round_to_precision(const std::vector<float>& in) {
  const auto want16 = [](float f) { return ref_half_to_float_bits(ref_float_to_half(f)); };
  const auto want_bf = [](float f) { return ref_bf16_to_float_bits(ref_float_to_bf16(f)); };
  std::vector<float> out(in.size() + 32);
  float* const aligned = out.data() + (64 - reinterpret_cast<std::uintptr_t>(out.data()) % 64) / 4;
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
    const std::size_t n = in.size() - offset;
    float* dst = aligned + (offset % 2);  // 64-byte aligned and misaligned destinations
    round_to_float16(in.data() + offset, dst, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(to_bits(dst[i]), want16(in[offset + i])) << "float16, value " << in[offset + i];
    }
    round_to_bfloat16(in.data() + offset, dst, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(to_bits(dst[i]), want_bf(in[offset + i])) << "bfloat16, value " << in[offset + i];
    }
  }
  std::vector<float> inplace = in;
  round_to_float16(inplace.data(), inplace.data(), inplace.size());
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(to_bits(inplace[i]), want16(in[i]));
  inplace = in;
  round_to_bfloat16(inplace.data(), inplace.data(), inplace.size());
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(to_bits(inplace[i]), want_bf(in[i]));
}

TEST(RoundToPrecision, MatchesTheReferenceRoundTrip) {
  std::mt19937_64 rng(7);
  std::vector<float> in(70001);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = random_float(rng);
  for (uint32_t h = 0; h < 0x10000u; h += 3) {
    const float v = from_bits(ref_half_to_float_bits(static_cast<uint16_t>(h)));
    in[h % in.size()] = std::nextafter(v, (h & 1) ? INFINITY : -INFINITY);
  }
  const core::ConvertIsa previous = core::convert_isa();
  for (const core::ConvertIsa isa : {core::ConvertIsa::portable, core::ConvertIsa::avx2_f16c,
                                     core::ConvertIsa::avx512, core::ConvertIsa::avx512_bf16}) {
    if (isa > core::convert_isa_supported()) continue;
    SCOPED_TRACE(core::to_string(isa));
    core::set_convert_isa_limit(isa);
    check_round_to_precision(in);
  }
  core::set_convert_isa_limit(previous);
}

// ---------------------------------------------------------------------------------------------

TEST(ConvertSimd, AvailabilityMatchesBehaviour) {
  const float f = 1.0f;
  float16 h;
  if (core::cpu_has_f16c_avx2()) {
    EXPECT_NO_THROW(core::convert_simd(&f, &h, 1));
    EXPECT_EQ(h.bits, 0x3c00);
  } else {
    EXPECT_THROW(core::convert_simd(&f, &h, 1), Error);
  }
}

}  // namespace
}  // namespace mixprec
