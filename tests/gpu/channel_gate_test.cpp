// The squeeze-and-excitation gate's gradient on CUDA (cuda/channel_gate.h: sum over the broadcast
// axes of g * x in one pass) against the exact sums and the CPU kernel (cpu/binary_channel.h) on
// the same inputs, in all four floating dtypes: NHWC gates with many pixels, odd and single
// channel counts, one group, rank 2, 16-bit operands not 4-byte aligned; pixels 1 and empty
// tensors; the same bits on every run; and mul's gradient through the public API.
//
// Oracle (support/summation_bound.h's method; TOLERANCES.md): each side sums k products in float32
// (k = the pixels per partial sum: ceil(pixels / parts) on CUDA, the CPU's blocks of 64), adds the
// partial sums in double and rounds through float32 to the dtype, so it is within
// 1.01 (k + 1) u32 M + 1.01 u_dtype |exact| (+ float16's subnormal floor) of the exact sum, M =
// sum |g x| per output (the same kernel on |g|, |x| in float64); the CUDA result is checked against
// the exact sum with its own bound and against the CPU with the sum of both sides' bounds.
#include "backend/cuda/channel_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/channel_geometry.h"
#include "backend/cpu/binary_channel.h"
#include "gpu/gpu_support.h"
#include "support/summation_bound.h"

namespace mixprec::testing {
namespace {

// The CPU kernel's float32 blocks (cpu/binary_channel.cpp, kRowBlock).
constexpr std::int64_t kCpuBlock = 64;

struct Sums {
  Tensor exact;      // float64: products of the dtype's values are exact in double
  Tensor magnitude;  // float64: sum |g x| per output
};

Sums exact_sums(const Tensor& g, const Tensor& x, const Shape& small) {
  const Tensor g64 = g.to(DType::float64), x64 = x.to(DType::float64);
  return {cpu::channel_gate_backward(g64, x64, small),
          cpu::channel_gate_backward(abs(g64), abs(x64), small)};
}

// Products per float32 partial sum on CUDA: ceil(pixels / parts) of the plan (either alignment).
double cuda_terms(DType dtype, const ChannelGeometry& geo) {
  std::int64_t k = 1;
  for (bool aligned : {true, false}) {
    const std::int64_t parts = cuda::kernels::channel_gate_plan(dtype, geo, aligned).parts;
    k = std::max(k, (geo.rows + parts - 1) / parts);
  }
  return static_cast<double>(k);
}

double cpu_terms(const ChannelGeometry& geo) {
  return static_cast<double>(std::min(kCpuBlock, geo.rows));
}

// Per output, the sum over the sides (k products per float32 partial sum each) of
// 1.01 (k + 1) u32 M + 1.01 u_dtype |exact| + floor: the distance of one side from the exact sum,
// or, summed over two sides, between them.
std::vector<double> side_bounds(const Sums& sums, DType dtype, const std::vector<double>& sides) {
  const auto e = sums.exact.to_vector<double>(), m = sums.magnitude.to_vector<double>();
  const double u32 = unit_roundoff(DType::float32), u = unit_roundoff(dtype);
  std::vector<double> bound(e.size(), 0.0);
  for (std::size_t i = 0; i < e.size(); ++i) {
    for (double k : sides) {
      bound[i] += 1.01 * (k + 1) * u32 * m[i] + 1.01 * u * std::abs(e[i]) + subnormal_floor(dtype);
    }
  }
  return bound;
}

// One side (got, on either device) against the exact sums; CUDA against the CPU.
::testing::AssertionResult near_exact(const Tensor& got, const Sums& sums, DType dtype, double k) {
  return within_bound(on_cpu(got), sums.exact, side_bounds(sums, dtype, {k}));
}
::testing::AssertionResult near_cpu(const Tensor& got, const Tensor& cpu_result, const Sums& sums,
                                    DType dtype, double k_cuda, double k_cpu) {
  return within_bound(on_cpu(got), cpu_result, side_bounds(sums, dtype, {k_cuda, k_cpu}));
}

// CUDA's gate gradient of g, x (on the host; g_dev, x_dev: the same values on the GPU) against
// the exact sums and the CPU kernel.
void expect_gate_matches(const Tensor& g, const Tensor& x, const Shape& small, const Tensor& g_dev,
                         const Tensor& x_dev) {
  const auto geo = channel_geometry(x.shape(), small);
  ASSERT_TRUE(geo.has_value());
  const DType dtype = g.dtype();
  const Tensor got = cuda::channel_gate_backward(g_dev, x_dev, small);
  const Tensor cpu_result = cpu::channel_gate_backward(g, x, small);
  EXPECT_TRUE(matches(got, cpu_result, {1e300, 1e300}));  // device, dtype and shape
  const Sums sums = exact_sums(g, x, small);
  const double k_cuda = cuda_terms(dtype, *geo), k_cpu = cpu_terms(*geo);
  EXPECT_TRUE(near_exact(got, sums, dtype, k_cuda)) << "CUDA against the exact sums";
  EXPECT_TRUE(near_exact(cpu_result, sums, dtype, k_cpu)) << "CPU against the exact sums";
  EXPECT_TRUE(near_cpu(got, cpu_result, sums, dtype, k_cuda, k_cpu)) << "CUDA against the CPU";
}

const std::vector<DType>& gate_dtypes() {
  static const std::vector<DType> all = {DType::float16, DType::bfloat16, DType::float32,
                                         DType::float64};
  return all;
}

TEST(GpuChannelGateTest, MatchesTheExactSumsAndTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 112, 112, 32}, {2, 1, 1, 32}},  // many pixels: 1568 parts, a warp per output
      {{16, 7, 7, 512}, {16, 1, 1, 512}},  // a few parts: a thread per output
      {{3, 7, 7, 33}, {3, 1, 1, 33}},      // odd C: no 16-bit pairs
      {{4, 5, 5, 1}, {4, 1, 1, 1}},        // C = 1, one part
      {{2, 14, 14, 96}, {1, 1, 1, 96}},    // one group of 392 pixels
      {{16, 40}, {40}},                    // rank 2: a bias row's gradient
  };
  for (const auto& [full, small] : cases) {
    for (DType dtype : gate_dtypes()) {
      SCOPED_TRACE(full.to_string() + " " + std::string(dtype_name(dtype)));
      const Tensor g = sample(full, -1, 1, dtype, 3), x = sample(full, -1, 1, dtype, 4);
      expect_gate_matches(g, x, small, on_gpu(g), on_gpu(x));
    }
  }
}

TEST(GpuChannelGateTest, SixteenBitOperandsNotFourByteAlignedReadSingleChannels) {
  MIXPREC_REQUIRE_GPU();
  const Shape full{2, 9, 9, 32}, small{2, 1, 1, 32};
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::int64_t n = full.numel();
    const Tensor g_flat = sample({n + 1}, -1, 1, dtype, 5),
                 x_flat = sample({n + 1}, -1, 1, dtype, 6);
    // Contiguous views one element into their storage: 2-byte aligned data pointers.
    const Tensor g_dev = on_gpu(g_flat).slice(0, 1, n + 1).reshape(full);
    const Tensor x_dev = on_gpu(x_flat).slice(0, 1, n + 1).reshape(full);
    ASSERT_TRUE(g_dev.is_contiguous());
    ASSERT_NE(reinterpret_cast<std::uintptr_t>(g_dev.data_ptr()) % 4, 0u);
    expect_gate_matches(g_flat.slice(0, 1, n + 1).reshape(full).contiguous(),
                        x_flat.slice(0, 1, n + 1).reshape(full).contiguous(), small, g_dev, x_dev);
  }
}

TEST(GpuChannelGateTest, PixelsOneGivesTheProductsAndEmptyTensorsZeros) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : gate_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    // Nothing broadcast: each output is one product in the compute type, rounded once, as mul's.
    for (const Shape& shape : {Shape{8, 1, 1, 40}, Shape{5, 1, 1, 7}, Shape{6, 3}}) {
      const Tensor g = sample(shape, -1, 1, dtype, 7), x = sample(shape, -1, 1, dtype, 8);
      EXPECT_TRUE(
          matches(cuda::channel_gate_backward(on_gpu(g), on_gpu(x), shape), mul(g, x), {0, 0}))
          << shape.to_string();
    }
    // No pixels: zeros of the gate's shape; no groups: an empty result.
    const Tensor none = zeros({2, 0, 5, 3}, {.dtype = dtype});
    EXPECT_TRUE(matches(cuda::channel_gate_backward(on_gpu(none), on_gpu(none), {2, 1, 1, 3}),
                        zeros({2, 1, 1, 3}, {.dtype = dtype}), {0, 0}));
    const Tensor no_groups = zeros({0, 4, 4, 3}, {.dtype = dtype});
    const Tensor empty =
        cuda::channel_gate_backward(on_gpu(no_groups), on_gpu(no_groups), {0, 1, 1, 3});
    EXPECT_EQ(empty.shape(), Shape({0, 1, 1, 3}));
    EXPECT_EQ(empty.dtype(), dtype);
  }
}

TEST(GpuChannelGateTest, TheSameInputsGiveTheSameBitsOnEveryRun) {
  MIXPREC_REQUIRE_GPU();
  for (const Shape& full : {Shape{2, 112, 112, 32}, Shape{16, 7, 7, 512}}) {
    const Shape small{full[0], 1, 1, full[3]};
    for (DType dtype : gate_dtypes()) {
      SCOPED_TRACE(full.to_string() + " " + std::string(dtype_name(dtype)));
      const Tensor g = on_gpu(sample(full, -1, 1, dtype, 9));
      const Tensor x = on_gpu(sample(full, -1, 1, dtype, 10));
      const auto first = on_cpu(cuda::channel_gate_backward(g, x, small)).to_vector<double>();
      for (int run = 0; run < 3; ++run) {
        const auto again = on_cpu(cuda::channel_gate_backward(g, x, small)).to_vector<double>();
        ASSERT_EQ(again.size(), first.size());
        // Bitwise through double (every value of the dtypes converts exactly; no NaN here).
        EXPECT_TRUE(std::equal(first.begin(), first.end(), again.begin())) << "run " << run;
      }
    }
  }
}

TEST(GpuChannelGateTest, MulGradientOfAGateMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const Shape full{2, 28, 28, 48}, small{2, 1, 1, 48};
  for (DType dtype : gate_dtypes()) {
    for (bool gate_first : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (gate_first ? " s * x" : " x * s"));
      const Tensor x = sample(full, -1, 1, dtype, 11), s = sample(small, 0, 1, dtype, 12);
      const Tensor w = sample(full, -1, 1, dtype, 13);
      const auto run = [&](const Tensor& xv, const Tensor& sv, const Tensor& wv) {
        const Tensor y = gate_first ? mul(sv, xv) : mul(xv, sv);
        return grad(y, {xv, sv}, wv);
      };
      Tensor x_cpu = x.detach(), s_cpu = s.detach();
      x_cpu.set_requires_grad(true);
      s_cpu.set_requires_grad(true);
      const std::vector<Tensor> cpu_grads = run(x_cpu, s_cpu, w);
      const std::vector<Tensor> gpu_grads = run(on_gpu(x, true), on_gpu(s, true), on_gpu(w));
      // dx = w * s: one product rounded once on both devices.
      EXPECT_TRUE(matches(gpu_grads[0], cpu_grads[0], {0, 0})) << "dx";
      // ds = sum over the pixels of w * x: the gate kernels of both devices.
      EXPECT_TRUE(matches(gpu_grads[1], cpu_grads[1], {1e300, 1e300})) << "ds";
      const auto geo = channel_geometry(full, small);
      const Sums sums = exact_sums(w, x, small);
      const double k_cuda = cuda_terms(dtype, *geo), k_cpu = cpu_terms(*geo);
      EXPECT_TRUE(near_exact(gpu_grads[1], sums, dtype, k_cuda)) << "ds: CUDA against the exact";
      EXPECT_TRUE(near_cpu(gpu_grads[1], cpu_grads[1], sums, dtype, k_cuda, k_cpu))
          << "ds: CUDA against the CPU";
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
