// depthwise_conv2d on CUDA (own kernels, cuda/depthwise.h) against the CPU, forward and backward
// (x, filters, bias), in float32, float16, bfloat16 and float64: depth multipliers 1 and 2, same
// padding with odd inputs and stride 2, dilation, a 5x5 EfficientNet-like layer; 16-bit
// accumulation, which the kernels compute in the CPU reference's order (same values); errors.
//
// Tolerances: DESIGN §4's, float32 scaled by 4 (the CPU sums in another order, KH * KW <= 25
// products per output; the filter gradient sums N * OH * OW products in chunks); a 16-bit result is
// the float sum rounded once on both backends, at most one ulp apart: the dtype's tolerance.
#include <string>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

struct DepthwiseCase {
  std::string name;
  Shape x, filters;  // filters (KH, KW, C, M)
  Conv2dOptions options;
};

std::vector<DepthwiseCase> cases() {
  std::vector<DepthwiseCase> c;
  c.push_back({"3x3 same multiplier 1", {2, 8, 7, 6}, {3, 3, 6, 1}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"3x3 same stride 2 odd input, multiplier 2", {2, 9, 7, 5}, {3, 3, 5, 2}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"5x5 same stride 2 (EfficientNet-like)", {2, 12, 12, 40}, {5, 5, 40, 1}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"3x3 valid dilation 2, multiplier 3", {1, 10, 11, 4}, {3, 3, 4, 3}, {}});
  c.back().options.dilation = {2, 2};
  return c;
}

void expect_depthwise_matches(const DepthwiseCase& c, DType dtype, Tolerance tol) {
  SCOPED_TRACE(c.name + " in " + std::string(dtype_name(dtype)));
  const Tensor x = sample(c.x, -1, 1, dtype, 1), w = sample(c.filters, -1, 1, dtype, 2);
  const Tensor b = sample({c.filters[2] * c.filters[3]}, -1, 1, dtype, 3);
  std::vector<Tensor> cpu_in = {x.detach(), w.detach(), b.detach()};
  for (Tensor& t : cpu_in) t.set_requires_grad(true);
  const std::vector<Tensor> gpu_in = {on_gpu(x, true), on_gpu(w, true), on_gpu(b, true)};
  const auto run = [&](const std::vector<Tensor>& in) {
    return depthwise_conv2d(in[0], in[1], in[2], c.options);
  };
  const Tensor y_cpu = run(cpu_in), y_gpu = run(gpu_in);
  ASSERT_TRUE(matches(y_gpu, y_cpu, tol)) << "forward";
  const Tensor weighting = sample(y_cpu.shape(), 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_cpu.size(), 3u);
  ASSERT_EQ(g_gpu.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], tol)) << "gradient of input " << k;
  }
}

TEST(GpuDepthwiseTest, ForwardAndBackwardMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (const DepthwiseCase& c : cases()) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
      const double scale = dtype == DType::float32 ? 4.0 : 1.0;
      expect_depthwise_matches(c, dtype, scaled(tolerance_for(dtype), scale));
    }
  }
}

TEST(GpuDepthwiseTest, SixteenBitAccumulationRoundsLikeTheCpuReference) {
  MIXPREC_REQUIRE_GPU();
  for (DepthwiseCase c : cases()) {
    c.options.accumulation = Accumulation::compute_dtype;
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      expect_depthwise_matches(c, dtype, tolerance_for(dtype));
    }
  }
}

TEST(GpuDepthwiseTest, ErrorsNameTheProblem) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1, 5, 5, 3}, -1, 1, DType::float32, 4));
  EXPECT_THROW(depthwise_conv2d(x, on_gpu(sample({3, 3, 4, 1}, -1, 1, DType::float32, 5))),
               ShapeError);
  EXPECT_THROW(depthwise_conv2d(x, sample({3, 3, 3, 1}, -1, 1, DType::float32, 6)), DeviceError);
  EXPECT_THROW(depthwise_conv2d(x, on_gpu(sample({3, 3, 3, 1}, -1, 1, DType::float32, 7)),
                                on_gpu(sample({4}, -1, 1, DType::float32, 8))),
               ShapeError);
}

}  // namespace
}  // namespace mixprec::testing
