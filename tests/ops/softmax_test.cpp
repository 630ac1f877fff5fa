// softmax / log_softmax: forward against a float64 reference computed here, finite-difference
// gradients in float64, float16/bfloat16 against float32, numerical stability and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::check_low_precision;
using testing::gradcheck;
using testing::tolerance_for;

enum class Kind { softmax, log_softmax };

// The float64 reference: for each line along `axis`, exp(x - max) / sum, or (x - max) - log(sum),
// in long double so that it is an independent, more accurate oracle than the kernel.
std::vector<double> reference(Kind kind, const std::vector<double>& x, const Shape& shape,
                              int axis) {
  if (axis < 0) axis += shape.rank();
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (int i = axis + 1; i < shape.rank(); ++i) inner *= shape[i];
  const std::int64_t length = shape[axis];
  std::vector<double> y(x.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      auto at = [&](std::int64_t l) {
        return static_cast<std::size_t>((o * length + l) * inner + j);
      };
      long double m = -std::numeric_limits<long double>::infinity();
      for (std::int64_t l = 0; l < length; ++l) m = std::max<long double>(m, x[at(l)]);
      long double s = 0;
      for (std::int64_t l = 0; l < length; ++l)
        s += std::exp(static_cast<long double>(x[at(l)]) - m);
      for (std::int64_t l = 0; l < length; ++l) {
        const long double d = static_cast<long double>(x[at(l)]) - m;
        y[at(l)] = static_cast<double>(kind == Kind::softmax ? std::exp(d) / s : d - std::log(s));
      }
    }
  }
  return y;
}

Tensor apply(Kind kind, const Tensor& x, int axis) {
  return kind == Kind::softmax ? softmax(x, axis) : log_softmax(x, axis);
}

// Runs the op on x and compares with the reference computed from x's stored values.
::testing::AssertionResult matches_reference(Kind kind, const Tensor& x, int axis,
                                             testing::Tolerance tol) {
  const Tensor y = apply(kind, x, axis);
  if (y.dtype() != x.dtype()) return ::testing::AssertionFailure() << "output dtype changed";
  const auto expected = reference(kind, x.to_vector<double>(), x.shape(), axis);
  return all_close(y, from_vector(expected, x.shape(), {.dtype = DType::float64}), tol);
}

Tensor random(const Shape& shape, DType dtype, std::uint64_t seed, double stddev = 2.0) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {.dtype = dtype}, gen);
}

class SoftmaxKinds : public ::testing::TestWithParam<Kind> {};

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  return info.param == Kind::softmax ? "softmax" : "log_softmax";
}

INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxKinds, ::testing::Values(Kind::softmax, Kind::log_softmax),
                         kind_name);

TEST_P(SoftmaxKinds, Float32MatchesReferenceOnEveryAxis) {
  const Tensor x = random({3, 4, 5}, DType::float32, 1);
  for (int axis : {0, 1, 2, -1, -2, -3}) {
    EXPECT_TRUE(matches_reference(GetParam(), x, axis, tolerance_for(DType::float32)))
        << "axis " << axis;
  }
}

TEST_P(SoftmaxKinds, Float64MatchesReferenceOnEveryAxis) {
  const Tensor x = random({4, 3, 6}, DType::float64, 2);
  for (int axis : {0, 1, 2}) {
    EXPECT_TRUE(matches_reference(GetParam(), x, axis, {1e-12, 1e-14})) << "axis " << axis;
  }
}

TEST_P(SoftmaxKinds, StridedInputMatchesReference) {
  // A transposed view and a stepped slice: the kernel must read through the strides.
  const Tensor base = random({6, 8, 5}, DType::float32, 3);
  const Tensor t = base.transpose(0, 2);    // (5, 8, 6)
  const Tensor s = base.slice(1, 1, 8, 2);  // (6, 4, 5)
  for (int axis : {0, 1, 2}) {
    EXPECT_TRUE(matches_reference(GetParam(), t, axis, tolerance_for(DType::float32))) << axis;
    EXPECT_TRUE(matches_reference(GetParam(), s, axis, tolerance_for(DType::float32))) << axis;
  }
}

TEST_P(SoftmaxKinds, LargeTensorsUseTiledAndParallelPathsCorrectly) {
  // (1, 300, 200) over axis 1: the slab does not fit one tile, so columns are split in tiles.
  // (64, 1500) over the last axis: long rows, run in parallel.
  for (DType dtype : {DType::float32, DType::float16}) {
    const Tensor tiled = random({1, 300, 200}, dtype, 4);
    EXPECT_TRUE(matches_reference(GetParam(), tiled, 1, tolerance_for(dtype))) << dtype_name(dtype);
    const Tensor rows = random({64, 1500}, dtype, 5);
    EXPECT_TRUE(matches_reference(GetParam(), rows, -1, tolerance_for(dtype))) << dtype_name(dtype);
    EXPECT_TRUE(matches_reference(GetParam(), rows, 0, tolerance_for(dtype))) << dtype_name(dtype);
  }
}

TEST_P(SoftmaxKinds, Float16AndBFloat16MatchReferenceWithinTolerance) {
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    const Tensor x = random({5, 7, 9}, dtype, 6);
    for (int axis : {0, 1, 2}) {
      EXPECT_TRUE(matches_reference(GetParam(), x, axis, tolerance_for(dtype)))
          << dtype_name(dtype) << " axis " << axis;
    }
  }
}

TEST_P(SoftmaxKinds, GradcheckFloat64OnSeveralAxes) {
  const Kind kind = GetParam();
  const Tensor x3 = random({3, 4, 5}, DType::float64, 7);
  for (int axis : {0, 1, 2, -1}) {
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& in) { return apply(kind, in[0], axis); }, {x3}))
        << "rank 3, axis " << axis;
  }
  const Tensor x2 = random({4, 6}, DType::float64, 8);
  for (int axis : {0, 1}) {
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& in) { return apply(kind, in[0], axis); }, {x2}))
        << "rank 2, axis " << axis;
  }
  const Tensor x1 = random({7}, DType::float64, 9);
  EXPECT_TRUE(
      gradcheck([&](const std::vector<Tensor>& in) { return apply(kind, in[0], 0); }, {x1}));
}

TEST_P(SoftmaxKinds, GradcheckFloat64ThroughAView) {
  // The gradient reaching softmax of a transposed view, and the op's output used twice.
  const Kind kind = GetParam();
  const Tensor x = random({4, 3, 5}, DType::float64, 10);
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) {
        const Tensor y = apply(kind, in[0].transpose(0, 1), 2);
        return mul(y, y);
      },
      {x}));
}

TEST_P(SoftmaxKinds, BackwardMatchesClosedFormInDouble) {
  // dx from the library against dx computed here from the reference y and a chosen g.
  const Kind kind = GetParam();
  const Shape shape{3, 4, 2};
  const int axis = 1;
  const Tensor x = random(shape, DType::float64, 11);
  const Tensor g = random(shape, DType::float64, 12);
  Tensor leaf = x.detach();
  leaf.set_requires_grad(true);
  const Tensor dx = grad(apply(kind, leaf, axis), {leaf}, g)[0];

  const auto xv = x.to_vector<double>(), gv = g.to_vector<double>();
  const auto y = reference(kind, xv, shape, axis);
  std::vector<double> expected(y.size());
  for (std::int64_t o = 0; o < 3; ++o) {
    for (std::int64_t j = 0; j < 2; ++j) {
      auto at = [&](std::int64_t l) { return static_cast<std::size_t>((o * 4 + l) * 2 + j); };
      double s = 0;
      for (std::int64_t l = 0; l < 4; ++l)
        s += kind == Kind::softmax ? gv[at(l)] * y[at(l)] : gv[at(l)];
      for (std::int64_t l = 0; l < 4; ++l) {
        expected[at(l)] =
            kind == Kind::softmax ? y[at(l)] * (gv[at(l)] - s) : gv[at(l)] - std::exp(y[at(l)]) * s;
      }
    }
  }
  EXPECT_TRUE(
      all_close(dx, from_vector(expected, shape, {.dtype = DType::float64}), {1e-12, 1e-14}));
}

TEST_P(SoftmaxKinds, LowPrecisionForwardMatchesFloat32) {
  // check_low_precision on the forward only (the output is detached): the 16-bit backward is
  // checked below against bounds that account for its reading of the rounded y.
  const Kind kind = GetParam();
  const Tensor x = random({6, 5, 8}, DType::float32, 13);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (int axis : {0, 1, -1}) {
      EXPECT_TRUE(check_low_precision(
          [&](const std::vector<Tensor>& in) { return apply(kind, in[0], axis).detach(); }, {x},
          dtype))
          << dtype_name(dtype) << " axis " << axis;
    }
  }
}

// The 16-bit backward against float32 on the same rounded x and g. The 16-bit op reads its own
// rounded output y16 = y (1 + d), |d| <= u (half the rtol of the dtype). For softmax that moves
// sum(g y) by up to u sum(|g| y), which dx = y (g - sum(g y)) does not shrink even where dx
// cancels to ~0 (dx sums to 0 along the axis, so it always cancels somewhere): the error is
// bounded by u y (|g| + sum(|g| y)), not by u |dx|. For log_softmax, exp(y16) is off by u |y| e^y
// relative, times |sum(g)|. The check: |dx16 - dx32| <= atol + rtol (|dx32| + that bound).
::testing::AssertionResult backward_within_rounding_bound(Kind kind, const Tensor& x32, DType dtype,
                                                          int axis) {
  const Shape& shape = x32.shape();
  Tensor x16 = x32.to(dtype).detach();
  Tensor xr = x16.to(DType::float32).detach();
  x16.set_requires_grad(true);
  xr.set_requires_grad(true);
  const Tensor g16 = random(shape, dtype, 21, 1.0);
  const Tensor gr = g16.to(DType::float32);
  const Tensor yr = apply(kind, xr, axis);
  const auto dx16 = grad(apply(kind, x16, axis), {x16}, g16)[0].to_vector<double>();
  const auto dxr = grad(yr, {xr}, gr)[0].to_vector<double>();
  const auto y = yr.to_vector<double>(), g = gr.to_vector<double>();

  const int a = axis < 0 ? axis + shape.rank() : axis;
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < a; ++i) outer *= shape[i];
  for (int i = a + 1; i < shape.rank(); ++i) inner *= shape[i];
  const testing::Tolerance tol = tolerance_for(dtype);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      auto at = [&](std::int64_t l) {
        return static_cast<std::size_t>((o * shape[a] + l) * inner + j);
      };
      double abs_gy = 0, sum_g = 0;
      for (std::int64_t l = 0; l < shape[a]; ++l) {
        abs_gy += std::abs(g[at(l)]) * (kind == Kind::softmax ? y[at(l)] : 0.0);
        sum_g += g[at(l)];
      }
      for (std::int64_t l = 0; l < shape[a]; ++l) {
        const std::size_t i = at(l);
        const double bound = kind == Kind::softmax
                                 ? y[i] * (std::abs(g[i]) + abs_gy)
                                 : std::exp(y[i]) * (1 + std::abs(y[i])) * std::abs(sum_g);
        const double allowed = tol.atol + tol.rtol * (std::abs(dxr[i]) + bound);
        if (!(std::abs(dx16[i] - dxr[i]) <= allowed)) {
          return ::testing::AssertionFailure()
                 << "flat index " << i << ": " << dx16[i] << " vs float32 " << dxr[i]
                 << " (allowed " << allowed << ")";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_P(SoftmaxKinds, LowPrecisionBackwardMatchesFloat32WithinRoundingBound) {
  const Tensor x = random({6, 5, 8}, DType::float32, 13);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (int axis : {0, 1, -1}) {
      EXPECT_TRUE(backward_within_rounding_bound(GetParam(), x, dtype, axis))
          << dtype_name(dtype) << " axis " << axis;
    }
  }
}

TEST_P(SoftmaxKinds, LowPrecisionBackwardIsComputedFromStoredValuesAndRoundedOnce) {
  // The contract of the 16-bit backward: dx is computed (here in double) from the stored y16 and
  // g16, then rounded once to the dtype. Any extra intermediate rounding shows up here.
  const Kind kind = GetParam();
  const Shape shape{4, 7, 6};
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (int axis : {0, 1, 2}) {
      Tensor x = random(shape, dtype, 22);
      x.set_requires_grad(true);
      const Tensor y = apply(kind, x, axis);
      const Tensor g = random(shape, dtype, 23, 1.0);
      const auto dx = grad(y, {x}, g)[0];
      const auto yv = y.to_vector<double>(), gv = g.to_vector<double>();
      std::int64_t outer = 1, inner = 1;
      for (int i = 0; i < axis; ++i) outer *= shape[i];
      for (int i = axis + 1; i < 3; ++i) inner *= shape[i];
      std::vector<double> expected(yv.size());
      for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t j = 0; j < inner; ++j) {
          auto at = [&](std::int64_t l) {
            return static_cast<std::size_t>((o * shape[axis] + l) * inner + j);
          };
          double s = 0;
          for (std::int64_t l = 0; l < shape[axis]; ++l) {
            s += kind == Kind::softmax ? gv[at(l)] * yv[at(l)] : gv[at(l)];
          }
          for (std::int64_t l = 0; l < shape[axis]; ++l) {
            expected[at(l)] = kind == Kind::softmax ? yv[at(l)] * (gv[at(l)] - s)
                                                    : gv[at(l)] - std::exp(yv[at(l)]) * s;
          }
        }
      }
      // Rounded once to the dtype; float (not double) accumulation inside the kernel may move a
      // value across a rounding boundary, so allow the dtype tolerance.
      const Tensor want = from_vector(expected, shape, {.dtype = DType::float64}).to(dtype);
      EXPECT_EQ(dx.dtype(), dtype);
      EXPECT_TRUE(all_close(dx, want, tolerance_for(dtype)))
          << dtype_name(dtype) << " axis " << axis;
    }
  }
}

TEST_P(SoftmaxKinds, HugeFloat16LogitsStayFiniteAndCorrect) {
  const Kind kind = GetParam();
  // Representable float16 values: spacing is 8 around 1e4 and 32 around 6e4. For log_softmax the
  // result x - max must itself fit float16 (|x - max| <= 65504), so its rows span less: the exact
  // -120000 of the softmax rows would rightly round to -inf.
  const std::vector<double> values =
      kind == Kind::softmax ? std::vector<double>{1e4,    9992,   -1e4,   1e4,     // row 0
                                                  60000,  59968,  -60000, 60000,   // row 1
                                                  -60000, -59968, -60000, -60000,  // row 2
                                                  60000,  -60000, 0,      -10000}  // row 3
                            : std::vector<double>{1e4,    9992,   -1e4,   1e4,     // row 0
                                                  60000,  59968,  0,      60000,   // row 1
                                                  -60000, -59968, -60000, -60000,  // row 2
                                                  60000,  30000,  0,      -4992};  // row 3
  const Shape shape{4, 4};
  for (DType dtype : {DType::float16, DType::float32}) {
    const Tensor x = from_vector(values, shape, {.dtype = dtype});
    Tensor leaf = x.detach();
    leaf.set_requires_grad(true);
    const Tensor y = apply(kind, leaf, -1);
    EXPECT_TRUE(all_finite(y)) << dtype_name(dtype) << "\n" << y;
    EXPECT_TRUE(matches_reference(kind, x, -1, tolerance_for(dtype))) << dtype_name(dtype);
    const Tensor dx = grad(sum(mul(y, random(shape, dtype, 14))), {leaf})[0];
    EXPECT_TRUE(all_finite(dx)) << dtype_name(dtype) << "\n" << dx;
  }
  if (kind == Kind::softmax) {
    // Exact expectations for a few entries: ties split evenly, the far side underflows to 0.
    const auto y =
        softmax(from_vector(values, shape, {.dtype = DType::float16}), -1).to_vector<double>();
    EXPECT_EQ(y[4], 0.5);
    EXPECT_EQ(y[7], 0.5);
    EXPECT_EQ(y[6], 0.0);
    EXPECT_EQ(y[9], 1.0);  // -59968 is 32 above the others: e^-32 of the rest vanishes
  }
}

TEST(SoftmaxStability, BFloat16HugeLogits) {
  const std::vector<double> values = {1e30, 1e30, -1e30, 0, -1e4, 1e4, 1e4, -1e4};
  const Tensor x = from_vector(values, {2, 4}, {.dtype = DType::bfloat16});
  const Tensor y = softmax(x, 1);
  ASSERT_TRUE(all_finite(y));
  EXPECT_TRUE(all_close(y, from_vector(std::vector<double>{0.5, 0.5, 0, 0, 0, 0.5, 0.5, 0}, {2, 4}),
                        tolerance_for(DType::bfloat16)));
}

TEST(SoftmaxStability, LogSoftmaxOfLargeLogitsHasNoInf) {
  // Computed naively, e^60000 overflows, and in float32 e^-200 underflows so log(softmax) of the
  // small entries is log(0) = -inf. The stable form is exact here.
  const std::vector<double> half_values = {60000, 59008, 30000, 0, -5000};  // exact in float16
  const Tensor h = from_vector(half_values, {5}, {.dtype = DType::float16});
  const Tensor lh = log_softmax(h, 0);
  ASSERT_TRUE(all_finite(lh)) << lh;
  EXPECT_TRUE(all_close(lh, from_vector(std::vector<double>{0, -992, -30000, -60000, -65000}, {5}),
                        tolerance_for(DType::float16)));

  const Tensor f =
      from_vector(std::vector<double>{100, 0, -100, -1e30}, {4}, {.dtype = DType::float32});
  const Tensor lf = log_softmax(f, 0);
  ASSERT_TRUE(all_finite(lf)) << lf;
  EXPECT_TRUE(all_close(lf, from_vector(std::vector<double>{0, -100, -200, -1e30}, {4}),
                        tolerance_for(DType::float32)));
  // The near-zero entry keeps full precision: -log(1 + e^-100 + ...) rounds to 0 (or -0) exactly.
  EXPECT_EQ(lf.to_vector<double>()[0], 0.0);
}

TEST(SoftmaxStability, LogSoftmaxNearMaxKeepsPrecisionForLargeLogits) {
  // Two equal large logits: log_softmax is -log(2) for both; computing x - (m + log s) in float
  // would lose log 2 to the rounding of 6e4 (ulp 2^-8 in float32).
  const Tensor x = from_vector(std::vector<double>{60000, 60000}, {2}, {.dtype = DType::float16});
  const auto y = log_softmax(x, 0).to_vector<double>();
  const double expected =
      static_cast<double>(static_cast<float>(float16(static_cast<float>(-std::log(2.0)))));
  EXPECT_EQ(y[0], expected);
  EXPECT_EQ(y[1], expected);
}

TEST_P(SoftmaxKinds, NaNPoisonsOnlyItsRow) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector(std::vector<double>{1, nan, 2, 1, 2, 3}, {2, 3});
  const auto y = apply(GetParam(), x, 1).to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(i)])) << i;
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isfinite(y[static_cast<std::size_t>(i)])) << i;
}

TEST(SoftmaxValues, RowsSumToOneOnEveryAxis) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    const Tensor x = random({4, 5, 6}, dtype, 15, 3.0);
    const Shape& s = x.shape();
    for (int axis = 0; axis < 3; ++axis) {
      const auto y = softmax(x, axis).to_vector<double>();
      std::vector<std::int64_t> idx(3);
      // Sum in double over the axis at every position of the other two axes.
      const int a = (axis + 1) % 3, b = (axis + 2) % 3;
      for (idx[a] = 0; idx[a] < s[a]; ++idx[a]) {
        for (idx[b] = 0; idx[b] < s[b]; ++idx[b]) {
          double total = 0;
          for (idx[axis] = 0; idx[axis] < s[axis]; ++idx[axis]) {
            const double v = y[static_cast<std::size_t>((idx[0] * s[1] + idx[1]) * s[2] + idx[2])];
            EXPECT_GE(v, 0.0);
            total += v;
          }
          // Each stored value v is rounded once (error <= v * 2^-p): the sum is 1 within 2^-p.
          EXPECT_NEAR(total, 1.0, tolerance_for(dtype).rtol)
              << dtype_name(dtype) << " axis " << axis;
        }
      }
    }
  }
}

TEST(SoftmaxValues, KnownValues) {
  // softmax(0, ln 2, ln 3, ln 4) = (1, 2, 3, 4) / 10; log_softmax = log of that.
  const Tensor x = from_vector(std::vector<double>{0, std::log(2.0), std::log(3.0), std::log(4.0)},
                               {4}, {.dtype = DType::float64});
  EXPECT_TRUE(all_close(
      softmax(x),
      from_vector(std::vector<double>{0.1, 0.2, 0.3, 0.4}, {4}, {.dtype = DType::float64}),
      {1e-14, 1e-15}));
  EXPECT_TRUE(all_close(
      log_softmax(x),
      from_vector(std::vector<double>{std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4)},
                  {4}, {.dtype = DType::float64}),
      {1e-14, 1e-14}));
  // A single element along the axis: softmax 1, log_softmax 0, gradient 0.
  Tensor one = from_vector(std::vector<double>{5, -7}, {2, 1}, {.dtype = DType::float64});
  one.set_requires_grad(true);
  EXPECT_EQ(softmax(one, 1).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(log_softmax(one, 1).to_vector<double>(), (std::vector<double>{0, 0}));
  const Tensor g = grad(sum(softmax(one, 1)), {one})[0];
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(SoftmaxValues, EmptyTensors) {
  EXPECT_EQ(softmax(zeros({0, 5}), 1).shape(), (Shape{0, 5}));
  EXPECT_EQ(log_softmax(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(softmax(zeros({3, 0, 2}, {.dtype = DType::float16}), 0).shape(), (Shape{3, 0, 2}));
}

TEST(SoftmaxErrors, AxisOutOfRangeNamesAxisAndRank) {
  const Tensor x = zeros({2, 3, 4});
  for (int axis : {3, -4}) {
    try {
      softmax(x, axis);
      FAIL() << "no exception for axis " << axis;
    } catch (const ShapeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("softmax"), std::string::npos) << m;
      EXPECT_NE(m.find("axis " + std::to_string(axis)), std::string::npos) << m;
      EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    }
  }
  try {
    log_softmax(x, 5);
    FAIL() << "no exception";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("log_softmax"), std::string::npos) << e.what();
  }
}

TEST(SoftmaxErrors, IntegerInputIsADTypeError) {
  const Tensor x = from_vector(std::vector<std::int32_t>{1, 2, 3}, {3});
  try {
    softmax(x);
    FAIL() << "no exception";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("softmax"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
  }
  EXPECT_THROW(log_softmax(x.to(DType::int64)), DTypeError);
}

TEST(SoftmaxAutograd, RecordsOnlyWhenNeeded) {
  Tensor x = random({2, 3}, DType::float32, 16);
  EXPECT_FALSE(softmax(x).requires_grad());
  x.set_requires_grad(true);
  const Tensor y = log_softmax(x);
  ASSERT_TRUE(y.requires_grad());
  EXPECT_EQ(y.grad_fn()->name(), "LogSoftmaxBackward");
  EXPECT_EQ(softmax(x).grad_fn()->name(), "SoftmaxBackward");
  NoGradScope no_grad;
  EXPECT_FALSE(softmax(x).requires_grad());
}

}  // namespace
}  // namespace mixprec
