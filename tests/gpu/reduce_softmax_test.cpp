// Reductions (sum, mean, max over every kind of axis set; argmax), softmax and log_softmax, and the
// broadcast pair sum_to / broadcast_to on CUDA against the CPU backend, forward and backward.
// Shapes cover the row kernel (reduced axes last), the column kernel (reduced axes leading), the
// split paths (few outputs, long reductions) and empty reductions.
#include <limits>

#include "gpu/op_harness.h"

namespace mixprec::testing {
namespace {

using Axes = std::vector<int>;

std::vector<OpCase> reduction_cases() {
  std::vector<OpCase> cases;
  struct Geometry {
    Shape shape;
    Axes axes;
  };
  const std::vector<Geometry> geometries = {
      {{6, 7, 8}, {}},      // everything: one output
      {{6, 7, 8}, {2}},     // last axis: rows
      {{6, 7, 8}, {0}},     // leading axis: columns
      {{6, 7, 8}, {0, 1}},  // leading axes
      {{6, 7, 8}, {1}},     // middle axis: permuted to rows
      {{6, 7, 8}, {0, 2}},  // non-adjacent axes
      {{4, 50000}, {1}},    // few long rows: split across blocks
      {{3000, 5}, {0}},     // few long columns: split across blocks
      {{200000}, {}},       // one long row
      // The column sums' 16-byte vectors (session 26): a bias gradient over N, H, W (many rows
      // per part, several float runs each), global average pooling over H, W (outer N), and
      // channels that allow no vector.
      {{4, 112, 112, 32}, {0, 1, 2}},
      {{8, 7, 7, 64}, {1, 2}},
      {{3, 9, 9, 5}, {0, 1, 2}},
  };
  for (const Geometry& g : geometries) {
    const std::string where = g.shape.to_string() + " axes " + std::to_string(g.axes.size());
    // Positive values: sums do not cancel, so the two backends' summation orders agree to a few
    // float32 ulp.
    cases.push_back({"sum " + where,
                     [axes = g.axes](const std::vector<Tensor>& x) { return sum(x[0], axes); },
                     {{g.shape, 0.5, 1.5}}});
    cases.push_back(
        {"mean keepdims " + where,
         [axes = g.axes](const std::vector<Tensor>& x) { return mean(x[0], axes, KeepDims::yes); },
         {{g.shape, 0.5, 1.5}}});
    cases.push_back({"max " + where,
                     [axes = g.axes](const std::vector<Tensor>& x) { return max(x[0], axes); },
                     {{g.shape, -3, 3, true}},  // integer values: ties split the gradient
                     2.0});
  }
  return cases;
}

TEST(GpuReduceTest, SumMeanMaxMatchTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  for (const OpCase& c : reduction_cases()) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuReduceTest, EmptyReductionsAndNaN) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : float_dtypes()) {
    const Tensor empty_axis = zeros({4, 0}, {.dtype = dtype});
    EXPECT_TRUE(matches(sum(on_gpu(empty_axis), {1}), sum(empty_axis, {1}), {0, 0}));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Tensor x = from_vector(std::vector<float>{1, nan, 3, 4, 5, 6}, {2, 3}).to(dtype);
    EXPECT_TRUE(matches(max(on_gpu(x), {1}), max(x, {1}), {0, 0}));  // NaN, then 6
    EXPECT_TRUE(matches(sum(on_gpu(x), {0}), sum(x, {0}), tolerance_for(dtype)));
  }
}

TEST(GpuReduceTest, Float16MeanOfManyLargeValuesDoesNotOverflow) {
  MIXPREC_REQUIRE_GPU();
  // 4096 values of 60000: the float16 sum would overflow, the float32 accumulator does not.
  const Tensor x = full({4096}, 60000.0, {.dtype = kFloat16});
  const Tensor m = on_cpu(mean(on_gpu(x)));
  EXPECT_EQ(m.item(), 60000.0);
}

TEST(GpuReduceTest, ArgmaxMatchesTheCpuForEveryDtype) {
  MIXPREC_REQUIRE_GPU();
  const Tensor base = sample({5, 9, 4}, -3, 3, kFloat32, 5).to(kInt32).to(kFloat32);  // ties
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8}) {
    const Tensor x = (dtype == kUInt8 ? add(base, 3.0) : base).to(dtype);
    for (int axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      EXPECT_TRUE(matches(argmax(on_gpu(x), axis), argmax(x, axis), {0, 0}));
      EXPECT_TRUE(
          matches(argmax(on_gpu(x), axis, KeepDims::yes), argmax(x, axis, KeepDims::yes), {0, 0}));
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor with_nan = from_vector(std::vector<float>{1, 7, nan, 7, nan}, {5});
  EXPECT_TRUE(matches(argmax(on_gpu(with_nan), 0), argmax(with_nan, 0), {0, 0}));  // index 2
}

TEST(GpuSoftmaxTest, SoftmaxAndLogSoftmaxMatchTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  std::vector<OpCase> cases;
  for (int axis : {-1, 1, 0}) {
    for (const Shape& shape : {Shape{32, 10}, Shape{4, 1000}, Shape{6, 7, 5}}) {
      if (axis >= shape.rank()) continue;
      const std::string where = shape.to_string() + " axis " + std::to_string(axis);
      cases.push_back({"softmax " + where,
                       [axis](const std::vector<Tensor>& x) { return softmax(x[0], axis); },
                       {{shape, -6, 6}}});
      cases.push_back({"log_softmax " + where,
                       [axis](const std::vector<Tensor>& x) { return log_softmax(x[0], axis); },
                       {{shape, -6, 6}}});
    }
  }
  for (const OpCase& c : cases) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuSoftmaxTest, LargeLogitsAndNaNRows) {
  MIXPREC_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x =
      from_vector(std::vector<float>{60000, 59990, 0, 1, nan, 2, -60000, -60000, -60000}, {3, 3});
  for (DType dtype : float_dtypes()) {
    const Tensor xc = x.to(dtype);
    EXPECT_TRUE(matches(softmax(on_gpu(xc)), softmax(xc), tolerance_for(dtype)));
    EXPECT_TRUE(matches(log_softmax(on_gpu(xc)), log_softmax(xc), tolerance_for(dtype)));
  }
}

TEST(GpuReduceTest, SumToAndBroadcastToMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<OpCase> cases = {
      {"sum_to (4, 5, 6) -> (5, 1)",
       [](const std::vector<Tensor>& x) {
         return sum_to(x[0], {5, 1});
       },
       {{{4, 5, 6}, 0.5, 1.5}}},
      {"broadcast_to (5, 1) -> (4, 5, 6)",
       [](const std::vector<Tensor>& x) {
         return broadcast_to(x[0], {4, 5, 6}).contiguous();
       },
       {{{5, 1}}}},
  };
  for (const OpCase& c : cases) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

}  // namespace
}  // namespace mixprec::testing
