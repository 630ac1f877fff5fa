// cast / Tensor::to(dtype): every dtype pair, rounding and overflow of 16-bit floats, bool
// semantics, strided inputs and the gradient dtype.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;

const DType kAllDtypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kBool};

// Values every dtype except bool holds exactly: small non-negative integers (uint8 has no sign).
const std::vector<double> kPortable{0, 1, 2, 3, 7, 100, 255};

TEST(CastTest, EveryPairRoundTripsPortableValues) {
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Tensor x = from_vector(kPortable, {7}, {.dtype = from});
      const Tensor y = cast(x, to);
      EXPECT_EQ(y.dtype(), to);
      EXPECT_EQ(y.shape(), x.shape());
      std::vector<double> expected;
      for (double v : kPortable) expected.push_back((from == kBool || to == kBool) ? (v != 0) : v);
      EXPECT_EQ(y.to_vector<double>(), expected);
      // And back: a lossless pair returns the original values.
      if (from != kBool && to != kBool) {
        EXPECT_EQ(cast(y, from).to_vector<double>(), kPortable);
      }
    }
  }
}

TEST(CastTest, SignedAndFractionalValuesBetweenSignedTypes) {
  const std::vector<double> v{-3.75, -1.5, -0.25, 0.0, 0.5, 2.25, 1000.0};
  const DType floats[] = {kFloat32, kFloat16, kBFloat16, kFloat64};  // all hold these exactly
  for (DType from : floats) {
    const Tensor x = from_vector(v, {7}, {.dtype = from});
    for (DType to : floats) {
      EXPECT_EQ(cast(x, to).to_vector<double>(), v) << dtype_name(from) << " -> " << dtype_name(to);
    }
    // To integers: truncation toward zero.
    for (DType to : {kInt32, kInt64}) {
      EXPECT_EQ(cast(x, to).to_vector<double>(), (std::vector<double>{-3, -1, 0, 0, 0, 2, 1000}))
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(CastTest, LargeIntegersGoThroughDouble) {
  // 2^24 + 1 is not a float32; int32 <-> int64 <-> float64 must keep it exactly.
  const Tensor i =
      from_vector(std::vector<std::int32_t>{16777217, -2147483647 - 1, 2147483647}, {3});
  EXPECT_EQ(cast(i, kInt64).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{16777217, -2147483648ll, 2147483647}));
  EXPECT_EQ(cast(i, kFloat64).to_vector<double>(),
            (std::vector<double>{16777217, -2147483648.0, 2147483647}));
  EXPECT_EQ(cast(cast(i, kFloat64), kInt32).to_vector<std::int32_t>(), i.to_vector<std::int32_t>());
  // float32 rounds it to even: 16777216.
  EXPECT_EQ(cast(i, kFloat32).to_vector<float>()[0], 16777216.0f);
  const std::int64_t big = (1ll << 53) + 2;
  EXPECT_EQ(cast(from_vector(std::vector<std::int64_t>{big}, {1}), kFloat64).to_vector<double>()[0],
            static_cast<double>(big));
}

TEST(CastTest, Float32ToFloat16RoundsAndOverflows) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x =
      from_vector(std::vector<double>{70000.0, -70000.0, 65504.0, 65519.0, 65520.0, 1e-8,
                                      2.98023223876953125e-8, 0x1p-24, 1.0 + 0x1p-11},
                  {9});
  const auto h = cast(x, kFloat16).to_vector<double>();
  EXPECT_EQ(h[0], inf);
  EXPECT_EQ(h[1], -inf);
  EXPECT_EQ(h[2], 65504.0);
  EXPECT_EQ(h[3], 65504.0);  // below the halfway point to 65536
  EXPECT_EQ(h[4], inf);      // the halfway point rounds (to even) up to inf
  EXPECT_EQ(h[5], 0.0);      // below half the smallest subnormal (2^-25)
  EXPECT_EQ(h[6], 0.0);      // exactly 2^-25: a tie, to even (0)
  EXPECT_EQ(h[7], 0x1p-24);  // the smallest subnormal is exact
  EXPECT_EQ(h[8], 1.0);      // 1 + half an ulp: tie to even
  // bfloat16 keeps the float32 range: 70000 -> 70144 (8 bits of precision: 1.0001000 * 2^16).
  const auto b = cast(x, kBFloat16).to_vector<double>();
  EXPECT_EQ(b[0], 70144.0);
  EXPECT_EQ(b[1], -70144.0);
  EXPECT_FALSE(std::isinf(cast(from_vector(std::vector<double>{3e38}, {1}), kBFloat16).item()));
  // float64 -> float16 also overflows, and NaN stays NaN.
  const Tensor d = from_vector(std::vector<double>{1e300, std::nan("")}, {2}, {.dtype = kFloat64});
  const auto dh = cast(d, kFloat16).to_vector<double>();
  EXPECT_EQ(dh[0], inf);
  EXPECT_TRUE(std::isnan(dh[1]));
  EXPECT_TRUE(std::isnan(cast(d, kBFloat16).to_vector<double>()[1]));
}

TEST(CastTest, Float16ConversionsMatchTheScalarTypeForEveryValue) {
  // Every float16 bit pattern, widened to float32 and narrowed back, is the identity (NaNs stay
  // NaN). The bulk path through cast must agree with the scalar float16 type.
  std::vector<std::uint16_t> bits(65536);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  const Tensor h = from_data(bits.data(), kFloat16, {65536}, {.dtype = kFloat16});
  const auto widened = cast(h, kFloat32).to_vector<float>();
  const auto back = cast(cast(h, kFloat32), kFloat16).to_vector<float16>();
  int mismatches = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const float expected = static_cast<float>(float16::from_bits(bits[i]));
    const bool nan = std::isnan(expected);
    if (nan ? !std::isnan(widened[i])
            : std::bit_cast<std::uint32_t>(widened[i]) != std::bit_cast<std::uint32_t>(expected))
      ++mismatches;
    if (nan ? (back[i].bits & 0x7fffu) <= 0x7c00u : back[i].bits != bits[i]) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(CastTest, BoolCasting) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector(std::vector<double>{0.0, -0.0, 0.5, -2.0, nan, 1e-30}, {6});
  EXPECT_EQ(cast(x, kBool).to_vector<bool>(),
            (std::vector<bool>{false, false, true, true, true, true}));
  // From 16-bit: 1e-30 flushes to 0 in float16 (false) but not in bfloat16 (true).
  EXPECT_EQ(cast(cast(x, kFloat16), kBool).to_vector<bool>(),
            (std::vector<bool>{false, false, true, true, true, false}));
  EXPECT_EQ(cast(cast(x, kBFloat16), kBool).to_vector<bool>(),
            (std::vector<bool>{false, false, true, true, true, true}));
  const Tensor i = from_vector(std::vector<std::int32_t>{0, 3, -1}, {3});
  EXPECT_EQ(cast(i, kBool).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  // bool -> numbers gives 0 and 1.
  const Tensor b = cast(i, kBool);
  for (DType to : kAllDtypes) {
    EXPECT_EQ(cast(b, to).to_vector<double>(), (std::vector<double>{0, 1, 1})) << dtype_name(to);
  }
  // uint8 256 does not exist; 2 as uint8 is true.
  EXPECT_EQ(
      cast(from_vector(std::vector<double>{2}, {1}, {.dtype = kUInt8}), kBool).to_vector<bool>(),
      (std::vector<bool>{true}));
}

TEST(CastTest, SameDtypeReturnsTheTensorItself) {
  const Tensor x = ones({3}, {.dtype = kBFloat16});
  EXPECT_TRUE(cast(x, kBFloat16).same(x));
  EXPECT_TRUE(x.to(kBFloat16).same(x));
  EXPECT_FALSE(x.to(kFloat32).same(x));
}

TEST(CastTest, StridedInputsComeOutContiguous) {
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = kFloat64});
  for (DType to : {kFloat32, kFloat16, kInt32, kBool}) {
    const Tensor y = cast(x.transpose(0, 1), to);
    EXPECT_TRUE(y.is_contiguous());
    const std::vector<double> expected =
        to == kBool ? std::vector<double>(6, 1.0) : std::vector<double>{1, 4, 2, 5, 3, 6};
    EXPECT_EQ(y.to_vector<double>(), expected) << dtype_name(to);
  }
  // A large tensor (parallel path, many chunks) of float32 -> float16 -> float32.
  const Tensor big = random_uniform({100001}, -100.0, 100.0);
  const auto direct = big.to_vector<float>();
  const auto halves = cast(big, kFloat16).to_vector<float16>();
  int bad = 0;
  for (std::size_t i = 0; i < direct.size(); ++i) bad += halves[i].bits != float16(direct[i]).bits;
  EXPECT_EQ(bad, 0);
}

TEST(CastTest, BackwardGivesTheInputDtype) {
  const DType floats[] = {kFloat32, kFloat16, kBFloat16, kFloat64};
  for (DType from : floats) {
    for (DType to : floats) {
      if (from == to) continue;
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Tensor x = from_vector(std::vector<double>{0.5, -2.0, 3.0}, {3},
                             {.dtype = from, .requires_grad = true});
      const Tensor y = cast(x, to);
      EXPECT_TRUE(y.requires_grad());
      const Tensor w = from_vector(std::vector<double>{2.0, -1.0, 0.25}, {3}, {.dtype = to});
      const Tensor g = grad(sum(y * w), {x})[0];
      EXPECT_EQ(g.dtype(), from);
      EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2.0, -1.0, 0.25}));
    }
  }
  // The float16 gradient of a float32 variable is widened exactly; a gradient too large for float16
  // is inf when it reaches the float32 variable (what loss scaling detects).
  Tensor v = from_vector(std::vector<double>{1.0}, {1}, {.requires_grad = true});
  const Tensor g = grad(sum(v.to(kFloat16) * 1000.0 * 1000.0), {v})[0];
  EXPECT_EQ(g.dtype(), kFloat32);
  EXPECT_TRUE(std::isinf(g.item()));
  // Casting to an integer or bool is not recorded.
  Tensor f = ones({2}, {.requires_grad = true});
  EXPECT_FALSE(cast(f, kInt64).requires_grad());
  EXPECT_FALSE(cast(f, kBool).requires_grad());
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) { return cast(cast(in[0], kFloat32), kFloat64) * in[0]; },
      {from_vector(std::vector<double>{0.5, 1.25}, {2}, {.dtype = kFloat64})},
      {.eps = 0x1p-10, .rtol = 1e-6, .atol = 1e-9}));  // x +- eps exact in float32
}

TEST(CastTest, Errors) { EXPECT_THROW(cast(Tensor(), kFloat32), ValueError); }

}  // namespace
}  // namespace mixprec
