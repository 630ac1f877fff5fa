// conv2d on CUDA (cuDNN) against the CPU (oneDNN), forward and backward (x, filters, bias), in
// float32, float16 and bfloat16: same padding with odd inputs and stride 2 (the asymmetric
// TensorFlow padding cuDNN cannot express, padded explicitly), valid padding with dilation,
// grouped filters, 1x1 stride-2 projections; float16 accumulation; the plan cache; error cases.
//
// Asymmetric padding: TensorFlow's `same` pads total = max((out - 1) * stride + window - in, 0)
// with the odd row/column at the bottom/right. It is asymmetric only when `total` is odd: 3x3
// stride 2 on an even input, 2x2 stride 1, 7x7 stride 2 on 224 (total 5: 2 on top, 3 below), the
// ResNet/EfficientNet stems and downsampling convolutions. Those take conv.cpp's explicit zero
// rows/columns (forward, filter gradient) and the slice of dx (data gradient); odd inputs with a
// 3x3 stride-2 window pad 1 and 1 and do not.
//
// Oracle (tests/gpu/TOLERANCES.md): every output and gradient element is a float32 sum of products
// (forward K = KH * KW * Cin/G, data gradient up to KH * KW * Cout/G, filter gradient N * OH * OW =
// 12544 on 224), summed in orders cuDNN and oneDNN choose. Their float32 error scales with the sum
// of the terms' magnitudes M, not with the result: support/summation_bound.h's bound, M from the
// same convolution on absolute values in float64. Products of zero-mean terms (x, w in [-1, 1)):
// a sequential float32 sum of n such terms errs by sum_j delta_j * S_j with partial sums S_j ~
// sqrt(j) * rms(term), a standard deviation of about 0.41 * u32 * M whatever n; blocked and split
// orders err less. 8 * u32 * M covers both sides with margin (measured on the 224 case: oneDNN
// vs the exact sum at most 1.72 u32 M over the 1176 filter-gradient elements; cuDNN vs oneDNN
// 0.73 u32 M). The bias gradient sums positive terms (the weighting): the library's reduce
// kernel on both backends, float runs of 64 folded into double, at most 63 u32 M each: 128.
// Plus DESIGN §4's per-dtype (rtol, atol) for the rounding of each result to its dtype (16-bit:
// sum + bias rounded once on both backends, up to one ulp apart).
#include "backend/cuda/conv.h"

#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "support/summation_bound.h"

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
  // Symmetric under TensorFlow's rule (total 2: 1 and 1), kept as controls.
  c.push_back({"3x3 same stride 2 odd input (symmetric)", {2, 9, 7, 4}, {3, 3, 4, 8}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"4x4 same stride 2 even input (symmetric)", {1, 8, 10, 3}, {4, 4, 3, 5}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  // Asymmetric: an explicit bottom row and right column of zeros.
  c.push_back({"3x3 same stride 2 even input (0 top, 1 bottom)", {2, 8, 10, 4}, {3, 3, 4, 8}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"2x2 same stride 1 (0 top, 1 bottom)", {2, 5, 6, 3}, {2, 2, 3, 4}, {}});
  c.back().options.padding = Padding::same;
  c.push_back({"7x7 same stride 2 on 224 (2 top, 3 bottom)", {1, 224, 224, 3}, {7, 7, 3, 8}, {}});
  c.back().options.padding = Padding::same;
  c.back().options.strides = {2, 2};
  c.push_back({"7x7 same stride 2 on 32x30 (2 top, 3 bottom)", {2, 32, 30, 3}, {7, 7, 3, 4}, {}});
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

// The float32 summation bound of the forward, the x and filter gradients (zero-mean products) and
// the bias gradient (positive terms), with one rounding to the dtype on each side.
SummationBound conv_bound(DType dtype, bool bias_gradient) {
  return {bias_gradient ? 128.0 : 8.0, 0.0, tolerance_for(dtype)};
}

// M of every element: the forward and the gradients of sum(|weighting| * conv(|x|, |w|) + |b|)
// in float64, where every term is non-negative.
std::vector<Tensor> magnitudes(const ConvCase& c, const std::vector<Tensor>& in,
                               const Tensor& weighting) {
  std::vector<Tensor> absolute;
  for (const Tensor& t : in) {
    absolute.push_back(abs(t.detach().to(DType::float64)));
    absolute.back().set_requires_grad(true);
  }
  const Tensor y = conv2d(absolute[0], absolute[1], c.bias ? absolute[2] : Tensor(), c.options);
  std::vector<Tensor> m = {y.detach()};
  for (const Tensor& g : grad(y, absolute, abs(weighting.to(DType::float64)))) m.push_back(g);
  return m;
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
  const Tensor weighting = sample(y_cpu.shape(), 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> m = magnitudes(c, cpu_in, weighting);
  ASSERT_TRUE(matches(y_gpu, y_cpu, {1e300, 1e300}));  // device, dtype and shape
  ASSERT_TRUE(within_reduction_bound(on_cpu(y_gpu), y_cpu, m[0], conv_bound(dtype, false)))
      << "forward";
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_cpu.size(), g_gpu.size());
  for (std::size_t k = 0; k < g_cpu.size(); ++k) {
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], {1e300, 1e300}));
    EXPECT_TRUE(
        within_reduction_bound(on_cpu(g_gpu[k]), g_cpu[k], m[k + 1], conv_bound(dtype, k == 2)))
        << "gradient of input " << k;
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

TEST(GpuConvTest, BackwardReusesThePaddedInputAndTheKrscFilters) {
  MIXPREC_REQUIRE_GPU();
  // 3x3 stride 2 on an even input: one padded input and one KRSC copy per forward; the backward
  // passes (dx and dw) reuse them instead of rebuilding both.
  const Tensor x = on_gpu(sample({2, 8, 8, 4}, -1, 1, DType::float16, 13), true);
  const Tensor w = on_gpu(sample({3, 3, 4, 6}, -1, 1, DType::float16, 14), true);
  const Tensor b = on_gpu(sample({6}, -1, 1, DType::float16, 15), true);
  const cuda::ConvCacheStats before = cuda::conv_cache_stats();
  const Tensor y = conv2d(x, w, b, {.strides = {2, 2}, .padding = Padding::same});
  const std::vector<Tensor> g = grad(y, {x, w, b}, on_gpu(ones(y.shape(), {.dtype = kFloat16})));
  const cuda::ConvCacheStats after = cuda::conv_cache_stats();
  EXPECT_EQ(after.padded_inputs - before.padded_inputs, 1);
  EXPECT_EQ(after.krsc_filters - before.krsc_filters, 1);
}

TEST(GpuConvTest, BiasIsAddedBeforeTheOneRounding) {
  MIXPREC_REQUIRE_GPU();
  // Near cancellation: sum + bias rounded once (the CPU's float32 composition) differs from
  // round(round(sum) + bias) by up to half an ulp of the pre-bias sum, about 1e-3 at |sum| 2-4.
  // 1x1 convolution, one input channel: y = x * w + b exactly computable in float32.
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = sample({1, 16, 16, 1}, 2.0, 4.0, dtype, 16);
    const Tensor w = full({1, 1, 1, 1}, 1.0009765625, {.dtype = dtype});  // 1 + 2^-10
    const Tensor b = full({1}, -3.0, {.dtype = dtype});
    const Tensor expected =
        add(conv2d(x.to(kFloat32), w.to(kFloat32)), b.to(kFloat32)).to(dtype);  // rounded once
    const Tensor y = conv2d(on_gpu(x), on_gpu(w), on_gpu(b));
    EXPECT_TRUE(matches(y, expected, {0, 0}));
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
