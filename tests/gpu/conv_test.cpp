// conv2d on CUDA (cuDNN) against the CPU (oneDNN), forward and backward (x, filters, bias), in
// float32, float16 and bfloat16: same padding with odd inputs and stride 2 (the asymmetric
// TensorFlow padding cuDNN cannot express, padded explicitly), valid padding with dilation,
// grouped filters, 1x1 stride-2 projections; float16 accumulation; the plan cache; error cases.
//
// Tolerances: DESIGN §4's per-dtype values, scaled because a convolution sums K = KH * KW * Cin/G
// products in an order cuDNN chooses (the CPU's differs): float32 results differ by ~K ulps of the
// largest partial sum, so float32 gets 16x; a 16-bit result is the float32 sum rounded once on both
// backends (up to one ulp apart near a rounding boundary) and once more after the bias add on CUDA
// (conv.cpp), so 16-bit gets 2x.
#include "backend/cuda/conv.h"

#include <string>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

struct ConvCase {
  std::string name;
  Shape x, filters;
  Conv2dOptions options;
  bool bias = true;
};

std::vector<ConvCase> cases() {
  std::vector<ConvCase> c;
  c.push_back({"3x3 same stride 1", {2, 7, 9, 5}, {3, 3, 5, 6}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"3x3 same stride 2 odd input (asymmetric padding)", {2, 9, 7, 4}, {3, 3, 4, 8}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back(
      {"4x4 same stride 2 even input (asymmetric padding)", {1, 8, 10, 3}, {4, 4, 3, 5}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"3x2 valid dilation 2", {1, 11, 10, 3}, {3, 2, 3, 4}, {}, false});
  c.back().options.dilation = {2, 2};
  c.push_back({"grouped (2 groups)", {2, 6, 6, 4}, {3, 3, 2, 6}, {}});
  c.back().options.groups = 2;
  c.back().options.padding = Padding::same;
  c.push_back({"1x1 stride 2 valid", {3, 5, 5, 8}, {1, 1, 8, 16}, {}});
  c.back().options.strides = {2, 2};
  return c;
}

Tolerance conv_tolerance(DType dtype) {
  return scaled(tolerance_for(dtype), dtype == DType::float32 ? 16.0 : 2.0);
}

// Forward and the gradients of x, filters and bias on both backends, for a fixed output weighting.
void expect_conv_matches(const ConvCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " in " + std::string(dtype_name(dtype)));
  Tensor x = sample(c.x, -1, 1, dtype, 1), w = sample(c.filters, -1, 1, dtype, 2);
  Tensor b = c.bias ? sample({c.filters[3]}, -1, 1, dtype, 3) : Tensor();
  std::vector<Tensor> cpu_in = {x.detach(), w.detach()},
                      gpu_in = {on_gpu(x, true), on_gpu(w, true)};
  if (c.bias) {
    cpu_in.push_back(b.detach());
    gpu_in.push_back(on_gpu(b, true));
  }
  for (Tensor& t : cpu_in) t.set_requires_grad(true);
  const auto run = [&](const std::vector<Tensor>& in) {
    return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.options);
  };
  const Tensor y_cpu = run(cpu_in), y_gpu = run(gpu_in);
  const Tolerance tol = conv_tolerance(dtype);
  ASSERT_TRUE(matches(y_gpu, y_cpu, tol)) << "forward";
  const Tensor weighting = sample(y_cpu.shape(), 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_cpu.size(), g_gpu.size());
  for (std::size_t k = 0; k < g_cpu.size(); ++k) {
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], tol)) << "gradient of input " << k;
  }
}

TEST(GpuConvTest, ForwardAndBackwardMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (const ConvCase& c : cases()) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      expect_conv_matches(c, dtype);
    }
  }
}

TEST(GpuConvTest, Float16AccumulationStaysCloseToFloat32Accumulation) {
  MIXPREC_REQUIRE_GPU();
  // 27 products of values in [-0.5, 0.5): float16 partial sums lose a few ulps at most.
  const Tensor x = sample({2, 6, 6, 3}, -0.5, 0.5, DType::float16, 5);
  const Tensor w = sample({3, 3, 3, 4}, -0.5, 0.5, DType::float16, 6);
  Conv2dOptions half{.padding = Padding::same, .accumulation = Accumulation::compute_dtype};
  const Tensor y16 = conv2d(on_gpu(x), on_gpu(w), Tensor(), half);
  const Tensor y32 = conv2d(x, w, Tensor(), Conv2dOptions{.padding = Padding::same});
  EXPECT_TRUE(matches(y16, y32, {2e-2, 2e-2}));
}

TEST(GpuConvTest, RepeatedShapesReuseTheCachedPlan) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1, 5, 5, 2}, -1, 1, DType::float32, 7));
  const Tensor w = on_gpu(sample({3, 3, 2, 3}, -1, 1, DType::float32, 8));
  conv2d(x, w);
  const cuda::ConvCacheStats before = cuda::conv_cache_stats();
  conv2d(x, w);
  const cuda::ConvCacheStats after = cuda::conv_cache_stats();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.entries, before.entries);
}

TEST(GpuConvTest, ErrorsNameTheProblem) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1, 5, 5, 2}, -1, 1, DType::float32, 9));
  const Tensor w_cpu = sample({3, 3, 2, 3}, -1, 1, DType::float32, 10);
  EXPECT_THROW(conv2d(x, w_cpu), DeviceError);  // filters left on the CPU
  EXPECT_THROW(conv2d(x, on_gpu(sample({3, 3, 4, 3}, -1, 1, DType::float32, 11))), ShapeError);
  EXPECT_THROW(conv2d(x, on_gpu(w_cpu.to(DType::float16))), DTypeError);
  EXPECT_THROW(conv2d(x, on_gpu(sample({7, 7, 2, 3}, -1, 1, DType::float32, 12))), ValueError);
}

}  // namespace
}  // namespace mixprec::testing
