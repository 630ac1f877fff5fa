// Pooling on CUDA (own kernels, cuda/pooling.h) against the CPU, forward and backward, in every
// floating dtype: max and average, valid and same padding with odd inputs (average divides by the
// real elements only), overlapping windows (gradients add up), ties (integer-valued inputs: the
// first maximum of a window takes the gradient, as on the CPU), global average pooling; errors.
#include <string>
#include <vector>

#include "gpu/op_harness.h"

namespace mixprec::testing {
namespace {

std::vector<OpCase> pool_cases(bool integer_valued) {
  std::vector<OpCase> cases;
  struct Geometry {
    std::string name;
    Shape x;
    Pool2dOptions options;
  };
  const std::vector<Geometry> geometries = {
      {"2x2 valid", {2, 8, 6, 5}, {}},
      {"3x3 stride 2 same, odd input (1 and 1)", {2, 9, 7, 4}, {{3, 3}, {2, 2}, Padding::same}},
      // TensorFlow's asymmetric `same` (the odd padding row/column at the bottom/right): the
      // windows of the last row/column hang over the input and average over fewer elements.
      {"3x3 stride 2 same, even input (0 and 1)", {2, 8, 10, 4}, {{3, 3}, {2, 2}, Padding::same}},
      {"2x2 stride 1 same (0 and 1)", {2, 5, 6, 3}, {{2, 2}, {1, 1}, Padding::same}},
      {"7x7 stride 2 same on 224 (2 and 3)", {1, 224, 224, 2}, {{7, 7}, {2, 2}, Padding::same}},
      {"3x3 stride 1 same (overlapping)", {1, 6, 7, 3}, {{3, 3}, {1, 1}, Padding::same}},
      {"2x3 stride (1, 2) valid", {3, 5, 9, 2}, {{2, 3}, {1, 2}, Padding::valid}},
      // 64 channels: the 16-byte vector kernels in every dtype (8 halves, 4 floats, 2 doubles);
      // ResNet's stem pool, padded as ZeroPadding2D(1) + valid 3x3 stride 2 does.
      {"3x3 stride 2 valid, 64 channels", {2, 17, 15, 64}, {{3, 3}, {2, 2}, Padding::valid}},
  };
  for (const Geometry& g : geometries) {
    const Pool2dOptions o = g.options;
    InputSpec in{g.x, -2, 2, integer_valued};
    cases.push_back(
        {"max " + g.name, [o](const std::vector<Tensor>& x) { return max_pool2d(x[0], o); }, {in}});
    cases.push_back(
        {"avg " + g.name, [o](const std::vector<Tensor>& x) { return avg_pool2d(x[0], o); }, {in}});
  }
  return cases;
}

TEST(GpuPoolingTest, MaxAndAveragePoolingMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (const OpCase& c : pool_cases(false)) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuPoolingTest, TiesSendTheGradientToTheFirstMaximumLikeTheCpu) {
  MIXPREC_REQUIRE_GPU();
  // Integers in (-2, 2): every window has ties.
  for (const OpCase& c : pool_cases(true)) {
    for (DType dtype : {DType::float32, DType::bfloat16}) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuPoolingTest, GlobalAveragePoolingMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const OpCase c{"global_avg_pool2d",
                 [](const std::vector<Tensor>& x) { return global_avg_pool2d(x[0]); },
                 {{{3, 7, 5, 6}}}};
  for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  // The coalesced middle-axis reduction (N, H*W, C): channels past one 32-wide tile, and a long
  // H*W that splits across blocks (partials combined by the finishing pass).
  const OpCase wide{"global_avg_pool2d wide",
                    [](const std::vector<Tensor>& x) { return global_avg_pool2d(x[0]); },
                    {{{2, 56, 56, 72}}}};
  for (DType dtype : float_dtypes()) expect_same_on_gpu(wide, dtype);
  const OpCase one{"global_avg_pool2d batch 1",
                   [](const std::vector<Tensor>& x) { return global_avg_pool2d(x[0]); },
                   {{{1, 7, 7, 1280}}}};
  for (DType dtype : float_dtypes()) expect_same_on_gpu(one, dtype);
}

TEST(GpuPoolingTest, ErrorsNameTheProblem) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1, 3, 3, 2}, -1, 1, DType::float32, 1));
  EXPECT_THROW(max_pool2d(x, {{4, 4}, {4, 4}, Padding::valid}), ValueError);  // window > input
  EXPECT_THROW(avg_pool2d(x, {{2, 2}, {0, 2}, Padding::valid}), ValueError);  // stride 0
  EXPECT_THROW(max_pool2d(on_gpu(sample({3, 3, 2}, -1, 1, DType::float32, 2))), ShapeError);
  EXPECT_THROW(max_pool2d(x.to(DType::int32)), DTypeError);
}

}  // namespace
}  // namespace mixprec::testing
