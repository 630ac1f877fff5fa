// Reductions (sum, mean, max), sum_to and broadcast_to. The reference reduces a row-major double
// array over any set of axes with its own index arithmetic.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::check_low_precision;
using testing::gradcheck;

enum class Kind { sum, mean, max };

// Reduces `v` of shape `s` over the axes in `axes` (already non-negative); empty = all axes.
// Returns the values in row-major order of the kept axes.
std::vector<double> reference(const std::vector<double>& v, const Shape& s, std::vector<int> axes,
                              Kind kind) {
  std::vector<bool> reduced(static_cast<std::size_t>(s.rank()), axes.empty());
  for (int a : axes) reduced[static_cast<std::size_t>(a)] = true;
  std::int64_t out_n = 1, count = 1;
  for (int i = 0; i < s.rank(); ++i) (reduced[static_cast<std::size_t>(i)] ? count : out_n) *= s[i];
  std::vector<double> acc(static_cast<std::size_t>(out_n),
                          kind == Kind::max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(s.rank()), 0);
  for (std::size_t n = 0; n < v.size(); ++n) {
    std::int64_t o = 0;
    for (int i = 0; i < s.rank(); ++i) {
      if (!reduced[static_cast<std::size_t>(i)]) o = o * s[i] + idx[static_cast<std::size_t>(i)];
    }
    double& a = acc[static_cast<std::size_t>(o)];
    a = kind == Kind::max ? std::max(a, v[n]) : a + v[n];
    for (int i = s.rank() - 1; i >= 0; --i) {
      if (++idx[static_cast<std::size_t>(i)] < s[i]) break;
      idx[static_cast<std::size_t>(i)] = 0;
    }
  }
  if (kind == Kind::mean) {
    for (double& a : acc) a /= static_cast<double>(count);
  }
  return acc;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keep) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < s.rank(); ++i) {
    bool r = axes.empty();
    for (int a : axes) r = r || a == i;
    if (!r)
      dims.push_back(s[i]);
    else if (keep)
      dims.push_back(1);
  }
  return Shape(dims);
}

std::vector<double> values(std::int64_t n, std::uint64_t seed, double lo = -2, double hi = 2) {
  Generator gen(seed);
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * gen.uniform());
  return v;
}

Tensor run(Kind kind, const Tensor& x, const std::vector<int>& axes, KeepDims keep) {
  switch (kind) {
    case Kind::sum: return sum(x, axes, keep);
    case Kind::mean: return mean(x, axes, keep);
    case Kind::max: return max(x, axes, keep);
  }
  return Tensor();
}

const char* kind_name(Kind k) { return k == Kind::sum ? "sum" : k == Kind::mean ? "mean" : "max"; }

struct AxesCase {
  Shape shape;
  std::vector<int> axes;  // as passed (may be negative)
};

const AxesCase kAxes[] = {
    {{2, 3, 4}, {}},
    {{2, 3, 4}, {0}},
    {{2, 3, 4}, {1}},
    {{2, 3, 4}, {2}},
    {{2, 3, 4}, {-1}},
    {{2, 3, 4}, {0, 2}},
    {{2, 3, 4}, {2, 0}},
    {{2, 3, 4}, {-2, -3}},
    {{2, 3, 4}, {0, 1, 2}},
    {{5}, {}},
    {{5}, {0}},
    {{}, {}},
    {{3, 1, 2}, {1}},
    {{1, 7}, {0}},
    {{2, 3, 4, 5}, {1, 3}},
};

class ReduceTest : public ::testing::TestWithParam<Kind> {};

TEST_P(ReduceTest, ForwardOverAxesWithAndWithoutKeepDims) {
  const Kind kind = GetParam();
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const AxesCase& c : kAxes) {
      for (KeepDims keep : {KeepDims::no, KeepDims::yes}) {
        std::vector<int> axes;
        for (int a : c.axes) axes.push_back(a < 0 ? a + c.shape.rank() : a);
        SCOPED_TRACE(std::string(kind_name(kind)) + " " + std::string(dtype_name(dtype)) + " " +
                     c.shape.to_string() + " axes " +
                     Shape(std::vector<std::int64_t>(axes.begin(), axes.end())).to_string() +
                     (keep == KeepDims::yes ? " keep" : ""));
        const Tensor x = from_vector(values(c.shape.numel(), 1), c.shape, {.dtype = dtype});
        const Tensor y = run(kind, x, c.axes, keep);
        const Shape expected_shape = reduced_shape(c.shape, axes, keep == KeepDims::yes);
        EXPECT_EQ(y.shape(), expected_shape);
        EXPECT_EQ(y.dtype(), dtype);
        const auto expected = reference(x.to_vector<double>(), c.shape, axes, kind);
        const testing::Tolerance tol =
            dtype == kFloat64 ? testing::Tolerance{1e-13, 1e-13} : testing::Tolerance{1e-6, 1e-6};
        EXPECT_TRUE(all_close(y, from_vector(expected, expected_shape, {.dtype = kFloat64}), tol));
      }
    }
  }
}

TEST_P(ReduceTest, ForwardOnStridedAndLargeInputs) {
  const Kind kind = GetParam();
  // A transposed (5, 4, 3) view of a (3, 4, 5) tensor.
  const auto v = values(60, 2);
  const Tensor base = from_vector(v, {3, 4, 5}, {.dtype = kFloat64});
  const Tensor x = base.permute({2, 1, 0});
  const auto xv = x.to_vector<double>();  // row-major values of the view (checked in tensor_test)
  for (const std::vector<int>& axes : {std::vector<int>{}, {0}, {1}, {2}, {0, 2}}) {
    const auto expected = reference(xv, x.shape(), axes, kind);
    EXPECT_TRUE(
        all_close(run(kind, x, axes, KeepDims::no),
                  from_vector(expected, reduced_shape(x.shape(), axes, false), {.dtype = kFloat64}),
                  {1e-13, 1e-13}));
  }
  // Rows longer than one chunk and many of them (parallel path), both reduction layouts.
  const Shape big{70, 3001};
  const auto bv = values(big.numel(), 3);
  const Tensor b = from_vector(bv, big, {.dtype = kFloat32});
  const auto b_stored = b.to_vector<double>();
  // float32 chunk sums of up to 210070 values: ~1e-3 absolute error is rounding, while a lost or
  // repeated element would be off by ~1.
  const testing::Tolerance tol{1e-5, 5e-3};
  for (const std::vector<int>& axes : {std::vector<int>{0}, {1}, {}}) {
    const auto expected = reference(b_stored, big, axes, kind);
    EXPECT_TRUE(
        all_close(run(kind, b, axes, KeepDims::no),
                  from_vector(expected, reduced_shape(big, axes, false), {.dtype = kFloat64}), tol))
        << "axes size " << axes.size();
  }
}

// The spatial axes of NHWC activations (a global average pooling): reduced axes in the middle,
// read in place as columns per batch entry; the channels span several chunks and the work is
// large enough for the parallel path.
TEST_P(ReduceTest, MiddleAxesOfLargeActivations) {
  const Kind kind = GetParam();
  const Shape shape{5, 7, 9, 2100};
  const Tensor x = from_vector(values(shape.numel(), 4), shape, {.dtype = kFloat32});
  const auto stored = x.to_vector<double>();
  for (const std::vector<int>& axes : {std::vector<int>{1, 2}, {1}, {0, 1, 2}, {2}}) {
    const auto expected = reference(stored, shape, axes, kind);
    EXPECT_TRUE(all_close(
        run(kind, x, axes, KeepDims::yes),
        from_vector(expected, reduced_shape(shape, axes, true), {.dtype = kFloat64}), {1e-5, 1e-4}))
        << "axes " << axes.size() << " from " << axes.front();
  }
  for (DType dtype : {DType::bfloat16, DType::float16}) {
    const Tensor low = x.to(dtype);
    const auto expected = reference(low.to_vector<double>(), shape, {1, 2}, kind);
    EXPECT_TRUE(
        all_close(run(kind, low, {1, 2}, KeepDims::no),
                  from_vector(expected, reduced_shape(shape, {1, 2}, false), {.dtype = kFloat64}),
                  {dtype == DType::bfloat16 ? 1.0 / 128 : 1.0 / 1024, 1e-3}))
        << dtype_name(dtype);
  }
}

// A bias gradient's shape: all of an activation's rows into a few channels. The rows are cut
// into blocks combined in a fixed order: exact against the reference within rounding, with NaN
// kept by max, and bit for bit the same on one thread and on two.
TEST_P(ReduceTest, ManyRowsFewColumnsInRowBlocks) {
  const Kind kind = GetParam();
  const Shape shape{32, 16, 16, 24};
  const std::vector<int> axes{0, 1, 2};
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    const Tensor x = from_vector(values(shape.numel(), 5), shape, {.dtype = kFloat32}).to(dtype);
    const auto expected = reference(x.to_vector<double>(), shape, axes, kind);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Tensor one = run(kind, x, axes, KeepDims::no);
    omp_set_num_threads(2);
    const Tensor two = run(kind, x, axes, KeepDims::no);
    omp_set_num_threads(threads);
    EXPECT_EQ(one.to_vector<double>(), two.to_vector<double>()) << dtype_name(dtype);
    const double rtol = dtype == DType::bfloat16 ? 1.0 / 128 : 1e-5;
    EXPECT_TRUE(all_close(
        two, from_vector(expected, reduced_shape(shape, axes, false), {.dtype = kFloat64}),
        {rtol, 1e-3}))
        << dtype_name(dtype);
  }
  if (kind == Kind::max) {
    std::vector<double> v = values(shape.numel(), 6);
    v[static_cast<std::size_t>(5000 * 24 + 7)] = std::nan("");
    const Tensor y = run(kind, from_vector(v, shape, {.dtype = kFloat32}), axes, KeepDims::no);
    const auto got = y.to_vector<double>();
    EXPECT_TRUE(std::isnan(got[7]));
    EXPECT_FALSE(std::isnan(got[6]));
  }
}

TEST_P(ReduceTest, Gradcheck) {
  const Kind kind = GetParam();
  for (const AxesCase& c : kAxes) {
    if (c.shape.numel() > 24) continue;
    SCOPED_TRACE(c.shape.to_string());
    // Distinct values (a shuffled ramp) so max has no ties for finite differences to cross.
    std::vector<double> v(static_cast<std::size_t>(c.shape.numel()));
    Generator gen(4);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i);
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[gen.below(i)]);
    const Tensor x = from_vector(v, c.shape, {.dtype = kFloat64});
    for (KeepDims keep : {KeepDims::no, KeepDims::yes}) {
      EXPECT_TRUE(gradcheck(
          [&](const std::vector<Tensor>& in) { return run(kind, in[0], c.axes, keep); }, {x}));
    }
  }
}

TEST_P(ReduceTest, LowPrecisionMatchesFloat32) {
  const Kind kind = GetParam();
  const Tensor x = from_vector(values(60, 5), {3, 4, 5});
  for (DType dtype : {kFloat16, kBFloat16}) {
    for (const std::vector<int>& axes : {std::vector<int>{}, {1}, {0, 2}, {-1}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axes " + std::to_string(axes.size()));
      EXPECT_TRUE(check_low_precision(
          [&](const std::vector<Tensor>& in) { return run(kind, in[0], axes, KeepDims::no); }, {x},
          dtype));
    }
  }
}

TEST_P(ReduceTest, Errors) {
  const Kind kind = GetParam();
  const Tensor x = zeros({2, 3});
  EXPECT_THROW(run(kind, x, {2}, KeepDims::no), ShapeError);
  EXPECT_THROW(run(kind, x, {-3}, KeepDims::no), ShapeError);
  EXPECT_THROW(run(kind, x, {1, -1}, KeepDims::no), ShapeError);  // the same axis twice
  try {
    run(kind, x, {5}, KeepDims::no);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(kind_name(kind)), std::string::npos) << e.what();
  }
  EXPECT_THROW(run(kind, zeros({2}, {.dtype = kInt32}), {}, KeepDims::no), DTypeError);
  EXPECT_THROW(run(kind, Tensor(), {}, KeepDims::no), ValueError);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ReduceTest, ::testing::Values(Kind::sum, Kind::mean, Kind::max),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

TEST(ReduceSpecialTest, MaxWithTiesSplitsTheGradient) {
  Tensor x = from_vector(std::vector<double>{1, 3, 3, 0, 2, 2, 2, -1}, {2, 4},
                         {.dtype = kFloat64, .requires_grad = true});
  // Row 0 has two maxima (3), row 1 three (2): each gets 1/2 and 1/3 of the row gradient.
  const Tensor g =
      grad(max(x, {1}), {x}, from_vector(std::vector<double>{6, 9}, {2}, {.dtype = kFloat64}))[0];
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 3, 3, 0, 3, 3, 3, 0}));
  // Over all axes: the single max 3 appears twice.
  const Tensor ga = grad(max(x), {x})[0];
  EXPECT_EQ(ga.to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0, 0, 0, 0, 0}));
  // Over axis 0 with keepdims: column-wise, ties where both rows hold the column max.
  Tensor y = from_vector(std::vector<double>{2, 5, 2, 1}, {2, 2},
                         {.dtype = kFloat64, .requires_grad = true});
  const Tensor gy = grad(sum(max(y, {0}, KeepDims::yes)), {y})[0];
  EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{0.5, 1, 0.5, 0}));
}

TEST(ReduceSpecialTest, MaxPropagatesNaNAndHandlesInf) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat32, kFloat16, kFloat64}) {
    const Tensor x =
        from_vector(std::vector<double>{1, nan, 3, -inf, -inf, -inf}, {2, 3}, {.dtype = dtype});
    const auto rows = max(x, {1}).to_vector<double>();
    EXPECT_TRUE(std::isnan(rows[0])) << dtype_name(dtype);
    EXPECT_EQ(rows[1], -inf);
    EXPECT_TRUE(std::isnan(max(x).item()));
    const auto cols = max(x, {0}).to_vector<double>();
    EXPECT_EQ(cols[0], 1.0);
    EXPECT_TRUE(std::isnan(cols[1]));
    EXPECT_TRUE(std::isnan(sum(x).item()));
  }
}

TEST(ReduceSpecialTest, EmptyReductions) {
  EXPECT_EQ(sum(zeros({0, 3}), {0}).to_vector<double>(), std::vector<double>(3, 0.0));
  EXPECT_EQ(sum(zeros({0})).item(), 0.0);
  EXPECT_EQ(sum(zeros({3, 0}), {0}).shape(), Shape({0}));
  EXPECT_THROW(max(zeros({0, 3}), {0}), ShapeError);
  EXPECT_EQ(max(zeros({0, 3}), {1}).shape(), Shape({0}));  // reduces non-empty rows: none of them
}

TEST(ReduceSpecialTest, Float16SumAccumulatesInFloat32) {
  // 1e6 ones summed in float16 would stop growing at 2048 (2048 + 1 rounds back to 2048); the
  // float32 accumulator gets 1e6, which then rounds to the float16 output: inf (> 65504). The mean
  // must divide before rounding and give exactly 1.
  const Tensor ones16 = ones({1000000}, {.dtype = kFloat16});
  EXPECT_EQ(mean(ones16).item(), 1.0);
  EXPECT_EQ(mean(ones({1000, 1000}, {.dtype = kBFloat16}), {0}).to_vector<double>(),
            std::vector<double>(1000, 1.0));
  EXPECT_TRUE(std::isinf(sum(ones16).item()));
  // 40000 ones: exactly representable in float16 (multiple of 32 in [32768, 65504]).
  EXPECT_EQ(sum(ones({40000}, {.dtype = kFloat16})).item(), 40000.0);
  EXPECT_EQ(sum(ones({40000, 2}, {.dtype = kFloat16}), {0}).to_vector<double>(),
            (std::vector<double>{40000.0, 40000.0}));
  // 1e6 values of 0.01 (stored as float16 0.01000213623046875): float16 accumulation would stall
  // near 32; the float32 sum is 10002.1 and rounds to the nearest float16, 10000 (spacing 8).
  const Tensor small = full({1000000}, 0.01, {.dtype = kFloat16});
  const double stored = small.to_vector<double>()[0];
  EXPECT_EQ(stored, 1311.0 * 0x1p-17);  // 0.01 = 1.28 * 2^-7 -> (1024 + 287) / 1024 * 2^-7
  const double exact = 1e6 * stored;
  const double nearest16 = std::nearbyint(exact / 8) * 8;
  EXPECT_EQ(sum(small).item(), nearest16);
  EXPECT_NEAR(mean(small).item(), stored, stored * 1e-3);
}

TEST(ReduceSpecialTest, SumToInvertsBroadcasting) {
  const Tensor x = from_vector(values(24, 6), {2, 3, 4}, {.dtype = kFloat64});
  const auto xv = x.to_vector<double>();
  // (2, 3, 4) -> (3, 1): reduce axis 0 (missing in the target) and axis 2 (extent 1 there).
  const auto expected = reference(xv, x.shape(), {0, 2}, Kind::sum);
  const Tensor s = sum_to(x, {3, 1});
  EXPECT_EQ(s.shape(), Shape({3, 1}));
  EXPECT_TRUE(all_close(s, from_vector(expected, {3, 1}, {.dtype = kFloat64}), {1e-14, 1e-14}));
  EXPECT_TRUE(
      all_close(sum_to(x, {4}),
                from_vector(reference(xv, x.shape(), {0, 1}, Kind::sum), {4}, {.dtype = kFloat64}),
                {1e-14, 1e-14}));
  EXPECT_TRUE(all_close(
      sum_to(x, {}), from_vector(reference(xv, x.shape(), {}, Kind::sum), {}, {.dtype = kFloat64}),
      {1e-14, 1e-14}));
  EXPECT_TRUE(sum_to(x, {2, 3, 4}).same(x));
  EXPECT_THROW(sum_to(x, {5}), ShapeError);
  EXPECT_THROW(sum_to(x, {1, 2, 3, 4}), ShapeError);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return sum_to(in[0], {3, 1}); }, {x}));
}

TEST(ReduceSpecialTest, BroadcastToIsAStrideZeroView) {
  const Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3, 1}, {.dtype = kFloat64});
  const Tensor b = broadcast_to(x, {2, 3, 4});
  EXPECT_EQ(b.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(b.data_ptr(), x.data_ptr());
  EXPECT_EQ(b.strides()[0], 0);
  EXPECT_EQ(b.strides()[2], 0);
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i) {
    for (double v : {1.0, 2.0, 3.0}) {
      for (int k = 0; k < 4; ++k) expected.push_back(v);
    }
  }
  EXPECT_EQ(b.to_vector<double>(), expected);
  EXPECT_EQ((b * 2.0).to_vector<double>()[23], 6.0);  // ops read through stride 0
  EXPECT_EQ(b.contiguous().to_vector<double>(), expected);
  EXPECT_TRUE(broadcast_to(x, {3, 1}).same(x));
  EXPECT_THROW(broadcast_to(x, {2, 4}), ShapeError);
  EXPECT_THROW(broadcast_to(x, {1}), ShapeError);
  // The gradient sums back: each of the 3 values is used 8 times.
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return broadcast_to(in[0], {2, 3, 4});
      },
      {x}));
  Tensor xv = x.detach();
  xv.set_requires_grad(true);
  EXPECT_EQ(grad(sum(broadcast_to(xv, {2, 3, 4})), {xv})[0].to_vector<double>(),
            std::vector<double>(3, 8.0));
}

TEST(ReduceSpecialTest, MeanGradientIsOneOverCount) {
  Tensor x = zeros({4, 5}, {.dtype = kFloat64, .requires_grad = true});
  EXPECT_EQ(grad(mean(x), {x})[0].to_vector<double>(), std::vector<double>(20, 1.0 / 20));
  EXPECT_EQ(grad(sum(mean(x, {1})), {x})[0].to_vector<double>(), std::vector<double>(20, 0.2));
  // float16 gradients of a mean over many elements stay representable (no 1/count underflow).
  Tensor h = zeros({100, 10}, {.dtype = kFloat16, .requires_grad = true});
  const Tensor gh = grad(mean(h), {h})[0];
  EXPECT_EQ(gh.dtype(), kFloat16);
  EXPECT_NEAR(gh.to_vector<double>()[0], 1e-3, 1e-6);
  // The gradient of a float16 mean over 1e6 elements, with a loss-scaled output gradient of 32768:
  // 32768 / 1e6 = 0.032768 rounds once to 1074 * 2^-15 (spacing 2^-15 in [2^-5, 2^-4)). Rounding
  // 1/count to float16 first (17 * 2^-24, a subnormal) would give 17 * 2^-9 = 0.0332, 1.3% off.
  Tensor big = zeros({1000000}, {.dtype = kFloat16, .requires_grad = true});
  const Tensor gb = grad(mean(big), {big}, scalar(32768.0, {.dtype = kFloat16}))[0];
  const auto gbv = gb.to_vector<double>();
  EXPECT_EQ(gbv.front(), 1074.0 * 0x1p-15);
  EXPECT_EQ(gbv.back(), 1074.0 * 0x1p-15);
}

}  // namespace
}  // namespace mixprec
