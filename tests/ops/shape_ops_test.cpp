// View ops: reshape, transpose, permute, slice. Values are checked against index arithmetic done
// in the test; views must share storage; gradients go back to the input geometry.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::gradcheck;

// 0, 1, 2, ... as float64 in the given shape.
Tensor ramp(const Shape& shape) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  std::iota(v.begin(), v.end(), 0.0);
  return from_vector(v, shape, {.dtype = kFloat64});
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

TEST(ReshapeTest, InfersOneExtentAndViews) {
  const Tensor x = ramp({2, 3, 4});
  const Tensor a = x.reshape({-1, 4});
  EXPECT_EQ(a.shape(), Shape({6, 4}));
  EXPECT_EQ(a.data_ptr(), x.data_ptr());
  EXPECT_EQ(vals(a), vals(x));
  EXPECT_EQ(x.reshape({4, -1}).shape(), Shape({4, 6}));
  EXPECT_EQ(x.reshape({-1}).shape(), Shape({24}));
  EXPECT_EQ(x.reshape({2, -1, 2}).shape(), Shape({2, 6, 2}));
  EXPECT_EQ(reshape(x, {24, 1}).shape(), Shape({24, 1}));
  EXPECT_TRUE(x.reshape({2, 3, 4}).same(x));
  EXPECT_EQ(scalar(3.0).reshape({1, 1}).shape(), Shape({1, 1}));
  EXPECT_EQ(ones({1, 1}).reshape({}).shape(), Shape{});
  EXPECT_EQ(zeros({0, 4}).reshape({-1, 2}).shape(), Shape({0, 2}));
}

TEST(ReshapeTest, Errors) {
  const Tensor x = ramp({2, 3, 4});
  EXPECT_THROW(x.reshape({-1, -1}), ShapeError);
  EXPECT_THROW(x.reshape({5, -1}), ShapeError);
  EXPECT_THROW(x.reshape({5, 5}), ShapeError);
  EXPECT_THROW(x.reshape({-2, 12}), ShapeError);
  try {
    x.reshape({7, 3});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("reshape"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 4)"), std::string::npos) << m;
    EXPECT_NE(m.find("(7, 3)"), std::string::npos) << m;
  }
  EXPECT_THROW(reshape(Tensor(), {1}), ValueError);
}

TEST(ReshapeTest, NonContiguousInputIsCopied) {
  const Tensor x = ramp({3, 4});
  const Tensor t = x.transpose(0, 1);  // (4, 3), not contiguous
  const Tensor r = t.reshape({12});
  EXPECT_NE(r.data_ptr(), x.data_ptr());
  std::vector<double> expected;
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 3; ++i) expected.push_back(i * 4 + j);
  }
  EXPECT_EQ(vals(r), expected);
  EXPECT_TRUE(r.is_contiguous());
  // Writing to the source afterwards does not change the copy.
  Tensor xm = x;
  xm.data<double>()[1] = -5;
  EXPECT_EQ(vals(r)[3], 1.0);
  // A stride-0 broadcast view is not viewable either.
  const Tensor b = broadcast_to(ramp({3}), {2, 3}).reshape({6});
  EXPECT_EQ(vals(b), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  // A contiguous slice (whole rows) is viewed in place, keeping its offset.
  const Tensor rows = ramp({4, 3}).slice(0, 1, 3);
  const Tensor flat = rows.reshape({6});
  EXPECT_EQ(flat.data_ptr(), rows.data_ptr());
  EXPECT_EQ(vals(flat), (std::vector<double>{3, 4, 5, 6, 7, 8}));
}

TEST(ReshapeTest, Gradcheck) {
  const Tensor x = ramp({2, 6}) * 0.1;
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return in[0].reshape({3, -1}) * in[0].reshape({3, 4});
      },
      {x}));
  // Through a copy of a non-contiguous view.
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return exp(in[0].transpose(0, 1).reshape({-1})); }, {x}));
}

TEST(TransposeTest, SwapsAxesAsAView) {
  const Tensor x = ramp({2, 3, 4});
  const Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), Shape({4, 3, 2}));
  EXPECT_EQ(t.data_ptr(), x.data_ptr());
  const auto tv = vals(t);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(tv[static_cast<std::size_t>((i * 3 + j) * 2 + k)], k * 12 + j * 4 + i);
      }
    }
  }
  EXPECT_EQ(vals(x.transpose(-1, -3)), tv);
  EXPECT_EQ(vals(transpose(x, 1, 1)), vals(x));
  EXPECT_EQ(vals(x.transpose(0, 1).transpose(0, 1)), vals(x));
  EXPECT_THROW(x.transpose(0, 3), ShapeError);
}

TEST(PermuteTest, ReordersAxes) {
  const Tensor x = ramp({2, 3, 4});
  const Tensor p = x.permute({1, 2, 0});  // (3, 4, 2): p[i, j, k] = x[k, i, j]
  EXPECT_EQ(p.shape(), Shape({3, 4, 2}));
  EXPECT_EQ(p.data_ptr(), x.data_ptr());
  EXPECT_EQ(p.strides(), (std::vector<std::int64_t>{4, 1, 12}));
  const auto pv = vals(p);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(pv[static_cast<std::size_t>((i * 4 + j) * 2 + k)], k * 12 + i * 4 + j);
      }
    }
  }
  EXPECT_EQ(vals(x.permute({-2, -1, -3})), pv);
  EXPECT_THROW(x.permute({0, 1}), ShapeError);
  EXPECT_THROW(x.permute({0, 1, 1}), ShapeError);
  EXPECT_THROW(x.permute({0, 1, 3}), ShapeError);
}

TEST(PermuteTest, GradientsGoBackToTheInputLayout) {
  Tensor x = ramp({2, 3, 4});
  x.set_requires_grad(true);
  // d sum(permute(x) * w) / dx = permute^-1(w).
  const Tensor w = ramp({3, 4, 2});
  const Tensor g = grad(sum(x.permute({1, 2, 0}) * w), {x})[0];
  EXPECT_EQ(g.shape(), Shape({2, 3, 4}));
  const auto gv = vals(g);
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(gv[static_cast<std::size_t>(k * 12 + i * 4 + j)], (i * 4 + j) * 2 + k);
      }
    }
  }
  const Tensor y = ramp({3, 4}) * 0.25;
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return in[0].transpose(0, 1) * in[0].transpose(1, 0); },
      {y}));
  const Tensor z = ramp({2, 3, 2}) * 0.1;
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return sigmoid(in[0].permute({2, 0, 1}));
      },
      {z}));
}

TEST(SliceTest, BasicRangesAreViews) {
  const Tensor x = ramp({4, 5});
  const Tensor s = x.slice(1, 1, 4);
  EXPECT_EQ(s.shape(), Shape({4, 3}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.strides(), (std::vector<std::int64_t>{5, 1}));
  EXPECT_EQ(vals(s), (std::vector<double>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18}));
  EXPECT_EQ(vals(x.slice(0, 2, 3)), (std::vector<double>{10, 11, 12, 13, 14}));
  // Writes through the base are visible in the slice.
  Tensor xm = x;
  xm.data<double>()[7] = -1;
  EXPECT_EQ(vals(s)[4], -1.0);
}

TEST(SliceTest, StepNegativeIndicesAndClamping) {
  const Tensor x = ramp({10});
  EXPECT_EQ(vals(x.slice(0, 1, 8, 3)), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(vals(x.slice(0, 0, 10, 4)), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(vals(x.slice(0, -3, 10)), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(vals(x.slice(0, -4, -1)), (std::vector<double>{6, 7, 8}));
  EXPECT_EQ(vals(x.slice(0, -100, 2)), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(x.slice(0, 8, 100)), (std::vector<double>{8, 9}));
  EXPECT_EQ(vals(x.slice(0, 1, 10, 20)), (std::vector<double>{1}));
  EXPECT_EQ(x.slice(0, 5, 5).numel(), 0);
  EXPECT_EQ(x.slice(0, 7, 3).numel(), 0);    // stop before start: empty
  EXPECT_EQ(x.slice(0, 10, 12).numel(), 0);  // past the end: empty
  EXPECT_EQ(x.slice(0, -1, -5).numel(), 0);
  // Huge steps and bounds do not overflow.
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(vals(x.slice(0, 2, huge, huge)), (std::vector<double>{2}));
  EXPECT_EQ(vals(ramp({5, 3}).slice(0, 1, huge, huge)), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(vals(x.slice(0, std::numeric_limits<std::int64_t>::min(), huge, 5)),
            (std::vector<double>{0, 5}));
  Tensor xg = ramp({10});
  xg.set_requires_grad(true);
  EXPECT_EQ(vals(grad(sum(xg.slice(0, 3, huge, huge)), {xg})[0]),
            (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(vals(grad(sum(xg.slice(0, 3, 3)) + sum(xg.slice(0, 9, 10)), {xg})[0]),
            (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  // A slice of a slice, along the last axis of a 3-D tensor, with a negative axis.
  const Tensor y = ramp({2, 3, 8});
  const Tensor ss = y.slice(-1, 1, 8, 2).slice(-1, 1, 4);  // columns 3, 5, 7
  EXPECT_EQ(ss.shape(), Shape({2, 3, 3}));
  const auto sv = vals(ss);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(sv[static_cast<std::size_t>(i * 3 + j)], i * 8 + 3 + 2 * j);
  }
  EXPECT_EQ(ss.data_ptr(), static_cast<const char*>(y.data_ptr()) + 3 * sizeof(double));
}

TEST(SliceTest, Errors) {
  const Tensor x = ramp({4});
  EXPECT_THROW(x.slice(0, 0, 4, 0), ValueError);
  EXPECT_THROW(x.slice(0, 4, 0, -1), ValueError);
  EXPECT_THROW(x.slice(1, 0, 1), ShapeError);
  EXPECT_THROW(scalar(1.0).slice(0, 0, 1), ShapeError);
}

TEST(SliceTest, BackwardScattersIntoZeros) {
  Tensor x = ramp({3, 6});
  x.set_requires_grad(true);
  const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, {.dtype = kFloat64});
  // Columns 1 and 4 (start 1, step 3).
  const Tensor g = grad(sum(x.slice(1, 1, 6, 3) * w), {x})[0];
  EXPECT_EQ(vals(g), (std::vector<double>{0, 1, 0, 0, 2, 0,  //
                                          0, 3, 0, 0, 4, 0,  //
                                          0, 5, 0, 0, 6, 0}));
  // Two overlapping slices accumulate.
  const Tensor g2 = grad(sum(x.slice(0, 0, 2)) + sum(x.slice(0, 1, 3)), {x})[0];
  EXPECT_EQ(vals(g2), (std::vector<double>{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1}));
  // 16-bit gradients keep their dtype.
  Tensor h = zeros({4}, {.dtype = kFloat16, .requires_grad = true});
  const Tensor gh = grad(sum(h.slice(0, -2, 4)), {h})[0];
  EXPECT_EQ(gh.dtype(), kFloat16);
  EXPECT_EQ(vals(gh), (std::vector<double>{0, 0, 1, 1}));
}

TEST(SliceTest, Gradcheck) {
  const Tensor x = ramp({4, 5}) * 0.1;
  for (auto [axis, start, stop, step] :
       {std::tuple{0, 1, 3, 1}, {1, 0, 5, 2}, {-1, -4, -1, 2}, {0, -10, 10, 3}}) {
    SCOPED_TRACE(std::to_string(axis) + " " + std::to_string(start) + ":" + std::to_string(stop) +
                 ":" + std::to_string(step));
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return in[0].slice(axis, start, stop, step) * in[0].slice(axis, start, stop, step);
        },
        {x}));
  }
  // slice of a transposed view
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return exp(in[0].transpose(0, 1).slice(0, 1, 4, 2)); },
      {x}));
}

TEST(ShapeOpsTest, ChainedViewsWithOpsMatchIndexArithmetic) {
  // y = transpose(slice(x)) + 1 in float16: ops read the strided view correctly.
  const Tensor x = ramp({4, 6}).to(kFloat16);
  const Tensor y = x.slice(1, 0, 6, 2).transpose(0, 1) + 1.0;  // (3, 4)
  std::vector<double> expected;
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 4; ++i) expected.push_back(i * 6 + 2 * j + 1);
  }
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(vals(y), expected);
}

// contiguous() of long rows: the copy cuts rows into pieces for the threads. Rows of stride 1
// (a slice), of stride 0 (a broadcast scalar and a broadcast column) and of another stride (a
// transpose), each longer than a piece, element by element against index arithmetic.
TEST(ShapeOpsTest, ContiguousCopiesOfLongRows) {
  const std::int64_t n = 100003;
  const Tensor values = arange(0.0, 2.0 * n, 1.0, {.dtype = DType::float32}).reshape({2, n});
  const auto sliced = values.slice(1, 1, n).contiguous().to_vector<double>();
  ASSERT_EQ(sliced.size(), static_cast<std::size_t>(2 * (n - 1)));
  for (std::int64_t r = 0; r < 2; ++r) {
    for (std::int64_t j = 0; j < n - 1; ++j) {
      ASSERT_EQ(sliced[static_cast<std::size_t>(r * (n - 1) + j)],
                static_cast<double>(r * n + j + 1));
    }
  }
  const auto scalar = broadcast_to(full({1}, 2.5), {n}).contiguous().to_vector<double>();
  EXPECT_EQ(scalar, std::vector<double>(static_cast<std::size_t>(n), 2.5));
  const Tensor column = from_vector(std::vector<double>{-1, 3}, {2, 1}).to(DType::bfloat16);
  const auto rows = broadcast_to(column, {2, n}).contiguous().to_vector<double>();
  for (std::int64_t j = 0; j < 2 * n; ++j) {
    ASSERT_EQ(rows[static_cast<std::size_t>(j)], j < n ? -1.0 : 3.0) << j;
  }
  const auto transposed = values.transpose(0, 1).contiguous().to_vector<double>();
  for (std::int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(transposed[static_cast<std::size_t>(2 * j)], static_cast<double>(j));
    ASSERT_EQ(transposed[static_cast<std::size_t>(2 * j + 1)], static_cast<double>(n + j));
  }
}

}  // namespace
}  // namespace mixprec
