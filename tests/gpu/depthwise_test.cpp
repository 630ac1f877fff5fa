// depthwise_conv2d on CUDA (own kernels, cuda/depthwise.h) against the CPU, forward and backward
// (x, filters, bias), in float32, float16, bfloat16 and float64: depth multipliers 1 and 2, same
// padding with odd inputs and stride 2, dilation, 5x5 EfficientNet-like layers, the fixed-window
// and register-tiled kernels (square 3x3 / 5x5 at stride 1 and 2) and the all-taps filter gradient
// (multiplier 1: chunks of pixels spanning rows and images, channel pairs and odd channel counts);
// 16-bit accumulation, which the kernels compute in the CPU reference's order (same values);
// errors.
//
// Oracle (float32 sums, tests/gpu/TOLERANCES.md): both backends sum in float32 in their own orders
// (the filter gradient over N * OH * OW products), so the error scales with M = sum |terms|, not
// with the possibly cancelled result: support/summation_bound.h's bound with M from the same op on
// absolute values in float64, as GpuConvTest (8 u32 M for zero-mean products, 128 u32 M for the
// bias gradient's positive terms), plus one rounding to the dtype on each side. float64 and the
// 16-bit accumulation mode: the dtype's tolerance (double sums; identical rounding orders).
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "support/summation_bound.h"

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
  // 2610 output pixels: the all-taps filter gradient's chunks of pixels span rows and images.
  c.push_back({"3x3 same, three 30x29 images", {3, 30, 29, 8}, {3, 3, 8, 1}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"5x5 same stride 1, odd channels", {2, 15, 14, 7}, {5, 5, 7, 1}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"3x3 valid stride 2", {2, 16, 17, 10}, {3, 3, 10, 1}, {}});
  c.back().options.strides = {2, 2};
  // The register-tiled kernels with rows that are no multiple of their tiles (8, or 4 at stride 2).
  c.push_back({"5x5 same stride 1, 13x11 (tiled)", {2, 13, 11, 6}, {5, 5, 6, 1}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"5x5 same stride 2 dilation 2, odd input", {2, 19, 21, 6}, {5, 5, 6, 1}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.dilation = {2, 2};
  return c;
}

// M of every element: the forward and the gradients of sum(|weighting| * depthwise(|x|, |w|) +
// |b|) in float64, where every term is non-negative.
std::vector<Tensor> magnitudes(const DepthwiseCase& c, const std::vector<Tensor>& in,
                               const Tensor& weighting) {
  std::vector<Tensor> absolute;
  for (const Tensor& t : in) {
    absolute.push_back(abs(t.detach().to(DType::float64)));
    absolute.back().set_requires_grad(true);
  }
  const Tensor y = depthwise_conv2d(absolute[0], absolute[1], absolute[2], c.options);
  std::vector<Tensor> m = {y.detach()};
  for (const Tensor& g : grad(y, absolute, abs(weighting.to(DType::float64)))) m.push_back(g);
  return m;
}

// Result k (0: forward, 1 + i: the gradient of input i) against the CPU's: the summation bound
// where `exact` is not given, else the tolerance `exact`.
::testing::AssertionResult agrees(const Tensor& gpu, const Tensor& cpu, const Tensor& magnitude,
                                  bool bias_gradient, const Tolerance* exact) {
  const ::testing::AssertionResult placed = matches(gpu, cpu, {1e300, 1e300});  // device, dtype
  if (!placed) return placed;
  if (exact != nullptr) return matches(gpu, cpu, *exact);
  const SummationBound bound{bias_gradient ? 128.0 : 8.0, 0.0, tolerance_for(cpu.dtype())};
  return within_reduction_bound(on_cpu(gpu), cpu, magnitude, bound);
}

// exact: the tolerance of a comparison without the summation bound (see the header), or null.
void expect_depthwise_matches(const DepthwiseCase& c, DType dtype, const Tolerance* exact) {
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
  const Tensor weighting = sample(y_cpu.shape(), 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> m = magnitudes(c, cpu_in, weighting);
  ASSERT_TRUE(agrees(y_gpu, y_cpu, m[0], false, exact)) << "forward";
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_cpu.size(), 3u);
  ASSERT_EQ(g_gpu.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(agrees(g_gpu[k], g_cpu[k], m[k + 1], k == 2, exact)) << "gradient of input " << k;
  }
}

TEST(GpuDepthwiseTest, ForwardAndBackwardMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (const DepthwiseCase& c : cases()) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      expect_depthwise_matches(c, dtype, nullptr);
    }
    const Tolerance float64 = tolerance_for(DType::float64);
    expect_depthwise_matches(c, DType::float64, &float64);
  }
}

TEST(GpuDepthwiseTest, SixteenBitAccumulationRoundsLikeTheCpuReference) {
  MIXPREC_REQUIRE_GPU();
  for (DepthwiseCase c : cases()) {
    c.options.accumulation = Accumulation::compute_dtype;
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      const Tolerance one_rounding = tolerance_for(dtype);
      expect_depthwise_matches(c, dtype, &one_rounding);
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
