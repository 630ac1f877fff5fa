// The CUDA depthwise kernels (src/backend/cuda/kernels/depthwise_kernels.cuh) run on the CPU by
// the host emulation (support/cuda_host_emulation.h): every thread of a grid of an odd size (so
// the grid-stride loops wrap), one after another. No GPU needed: this checks the kernels' indexing,
// their variants (channel pairs, 32/64-bit indices, the fixed 3x3/5x5 windows at stride 1/2, the
// all-taps filter gradient with its chunks of pixels and the warp-ordered finish, the
// register-tiled forward and input gradient, which must give the plain kernels' bits) and their
// summation orders, in every storage type.
//
// Oracles:
//  - float sums: the exact sum (float64 loops over the same rounded inputs) within the rigorous
//    bound of a float summation of n terms, 1.01 n u M (M = sum |terms|), plus one rounding to the
//    storage type. 16-bit products are exact in float, so the emulation does what the GPU does
//    bit for bit in 16-bit storage (fused multiply-add or not).
//  - 16-bit accumulation (every partial sum rounded): the CPU library's depthwise_conv2d with
//    Accumulation::compute_dtype, which the kernels follow order for order: equal values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/depthwise.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/depthwise_kernels.cuh"
#include "backend/cuda/kernels/depthwise_tiled_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using depthwise_kernels::backward_data_kernel;
using depthwise_kernels::backward_data_tiled_kernel;
using depthwise_kernels::filter_finish_kernel;
using depthwise_kernels::filter_partials_kernel;
using depthwise_kernels::filter_taps_kernel;
using depthwise_kernels::forward_kernel;
using depthwise_kernels::forward_tiled_kernel;

// A grid size that is no multiple of the work: the grid-stride loops wrap (a multiple of kWarp, for
// the finish kernel's warps).
constexpr std::int64_t kGridThreads = 7 * kWarp;

struct Case {
  std::string name;
  std::int64_t batch, in_h, in_w, channels, multiplier, kernel, stride, dilation;
  bool same;  // TensorFlow `same` padding (the odd pixel at the bottom/right), else `valid`
};

DepthwiseGeometry geometry_of(const Case& c) {
  DepthwiseGeometry g;
  g.batch = c.batch, g.in_h = c.in_h, g.in_w = c.in_w, g.channels = c.channels;
  g.multiplier = c.multiplier, g.kernel_h = g.kernel_w = c.kernel;
  g.stride_h = g.stride_w = c.stride, g.dilation_h = g.dilation_w = c.dilation;
  const std::int64_t extent = (c.kernel - 1) * c.dilation + 1;
  const auto out = [&](std::int64_t in) {
    return c.same ? (in + c.stride - 1) / c.stride : (in - extent) / c.stride + 1;
  };
  g.out_h = out(c.in_h), g.out_w = out(c.in_w);
  const auto pad = [&](std::int64_t in, std::int64_t o) {
    const std::int64_t total = (o - 1) * c.stride + extent - in;
    return c.same && total > 0 ? total / 2 : 0;
  };
  g.pad_top = pad(c.in_h, g.out_h), g.pad_left = pad(c.in_w, g.out_w);
  return g;
}

std::vector<Case> cases() {
  return {
      {"3x3 same, multiplier 1", 2, 8, 7, 6, 1, 3, 1, 1, true},
      {"3x3 same stride 2, odd input, multiplier 2", 2, 9, 7, 5, 2, 3, 2, 1, true},
      {"5x5 same stride 2 (EfficientNet-like)", 2, 12, 12, 40, 1, 5, 2, 1, true},
      {"3x3 valid dilation 2, multiplier 3", 1, 10, 11, 4, 3, 3, 1, 2, false},
      {"3x3 same, three 30x29 images", 3, 30, 29, 8, 1, 3, 1, 1, true},
      {"5x5 same stride 1, odd channels", 2, 15, 14, 7, 1, 5, 1, 1, true},
      {"3x3 valid stride 2", 2, 16, 17, 10, 1, 3, 2, 1, false},
      {"5x5 same stride 2 dilation 2", 2, 19, 21, 6, 1, 5, 2, 2, true},
      {"2x2 valid (no fixed window), multiplier 1", 2, 6, 5, 4, 1, 2, 1, 1, false},
      // Rows that are no multiple of the tiles (8 at stride 1, 4 at stride 2), pad 2 at 5x5.
      {"5x5 same stride 1, 13x11", 2, 13, 11, 6, 1, 5, 1, 1, true},
      {"3x3 same stride 2, 9x13", 1, 9, 13, 4, 1, 3, 2, 1, true},
      {"5x5 valid stride 2, 15x17", 1, 15, 17, 2, 1, 5, 2, 1, false},
  };
}

// The exact forward, input gradient and filter gradient of one case (float64 over the rounded
// inputs), each with M = sum |terms| per element and the terms' count.
struct Exact {
  std::vector<double> y, y_m, dx, dx_m, dw, dw_m;
};

Exact exact_of(const DepthwiseGeometry& g, const std::vector<double>& x,
               const std::vector<double>& w, const std::vector<double>& b,
               const std::vector<double>& dy) {
  const std::int64_t cm = g.channels * g.multiplier;
  Exact e;
  e.y.assign(dy.size(), 0.0), e.y_m.assign(dy.size(), 0.0);
  e.dx.assign(x.size(), 0.0), e.dx_m.assign(x.size(), 0.0);
  e.dw.assign(w.size(), 0.0), e.dw_m.assign(w.size(), 0.0);
  for (std::int64_t n = 0; n < g.batch; ++n) {
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        for (std::int64_t oc = 0; oc < cm; ++oc) {
          const std::int64_t yi = ((n * g.out_h + oh) * g.out_w + ow) * cm + oc;
          e.y[yi] = b[oc], e.y_m[yi] = std::abs(b[oc]);
          for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
            for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
              const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
              const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
              if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
              const std::int64_t xi =
                  ((n * g.in_h + ih) * g.in_w + iw) * g.channels + oc / g.multiplier;
              const std::int64_t wi = (kh * g.kernel_w + kw) * cm + oc;
              e.y[yi] += x[xi] * w[wi], e.y_m[yi] += std::abs(x[xi] * w[wi]);
              e.dx[xi] += dy[yi] * w[wi], e.dx_m[xi] += std::abs(dy[yi] * w[wi]);
              e.dw[wi] += x[xi] * dy[yi], e.dw_m[wi] += std::abs(x[xi] * dy[yi]);
            }
          }
        }
      }
    }
  }
  return e;
}

// |got - exact| <= 1.01 * terms * u_sum * M + u_store * |exact| (+ float16's subnormal floor)
// everywhere: a float (double for float64) summation of `terms` terms, rounded once to T.
template <typename T>
::testing::AssertionResult within_exact(const std::vector<T>& got, const std::vector<double>& exact,
                                        const std::vector<double>& magnitude, double terms) {
  const double u_sum = unit_roundoff_of<compute_t<T>>();
  const double u_store = unit_roundoff_of<T>();
  const double floor = std::is_same_v<T, float16> ? std::ldexp(1.0, -25) : 0.0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double value = static_cast<double>(to_compute(got[i]));
    const double bound = 1.01 * terms * u_sum * magnitude[i] + u_store * std::abs(exact[i]) + floor;
    if (!(std::abs(value - exact[i]) <= bound)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << value << " vs exact "
                                           << exact[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Uniform values in [lo, hi) rounded to T, as T and as double.
template <typename T>
void draw(std::size_t count, double lo, double hi, std::uint32_t seed, std::vector<T>& out,
          std::vector<double>& exact) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
  out.resize(count), exact.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
    exact[i] = static_cast<double>(to_compute(out[i]));
  }
}

// A case's x, filters, bias and dy, each drawn from its own seed (first_seed, +1, +2, +3) and
// rounded to T, as T and as double (x, w, b, dy; xe, we, be, dye).
template <typename T>
struct Operands {
  std::vector<T> x, w, b, dy;
  std::vector<double> xe, we, be, dye;
  Operands(const DepthwiseGeometry& g, std::uint32_t first_seed, double dy_lo = -1,
           double dy_hi = 1) {
    const std::int64_t cm = g.channels * g.multiplier;
    draw<T>(g.batch * g.in_h * g.in_w * g.channels, -1, 1, first_seed, x, xe);
    draw<T>(g.kernel_h * g.kernel_w * cm, -1, 1, first_seed + 1, w, we);
    draw<T>(cm, -1, 1, first_seed + 2, b, be);
    draw<T>(g.batch * g.out_h * g.out_w * cm, dy_lo, dy_hi, first_seed + 3, dy, dye);
  }
};

// Calls f.template operator()<K, S>() for the runtime window and, where the case has one, the
// fixed window the launchers pick (depthwise.cu's with_window).
template <typename F>
void for_each_window(const DepthwiseGeometry& g, F&& f) {
  f.template operator()<0, 0>();
  const std::int64_t k = g.kernel_h, s = g.stride_h;
  if (k == 3 && s == 1) f.template operator()<3, 1>();
  if (k == 3 && s == 2) f.template operator()<3, 2>();
  if (k == 5 && s == 1) f.template operator()<5, 1>();
  if (k == 5 && s == 2) f.template operator()<5, 2>();
}

// Every forward and input-gradient variant within the exact bound (float sums).
template <typename T>
void expect_forward_and_input_gradient(const Case& c) {
  const DepthwiseGeometry g = geometry_of(c);
  const std::int64_t cm = g.channels * g.multiplier;
  const auto& [x, w, b, dy, xe, we, be, dye] = Operands<T>(g, 1);
  const Exact e = exact_of(g, xe, we, be, dye);
  const double taps = static_cast<double>(g.kernel_h * g.kernel_w * g.multiplier) + 1;
  const bool pairs_forward = cm % 2 == 0 && (g.multiplier == 1 || g.multiplier % 2 == 0);
  const bool pairs_backward = g.multiplier == 1 && g.channels % 2 == 0;
  for_each_window(g, [&]<int K, int S>() {
    const auto forward = [&]<typename I, int V>(const char* what) {
      std::vector<T> y(dy.size());
      run_grid(kGridThreads, [&] {
        forward_kernel<T, I, V, K, S>(g, x.data(), w.data(), b.data(), y.data(), false);
      });
      EXPECT_TRUE(within_exact(y, e.y, e.y_m, taps)) << what << " K " << K << " S " << S;
    };
    const auto backward = [&]<typename I, int V>(const char* what) {
      std::vector<T> dx(x.size());
      run_grid(kGridThreads, [&] {
        backward_data_kernel<T, I, V, K, S>(g, dy.data(), w.data(), dx.data(), false);
      });
      EXPECT_TRUE(within_exact(dx, e.dx, e.dx_m, taps)) << what << " K " << K << " S " << S;
    };
    forward.template operator()<std::int32_t, 1>("forward, 32-bit indices");
    forward.template operator()<std::int64_t, 1>("forward, 64-bit indices");
    backward.template operator()<std::int32_t, 1>("input gradient, 32-bit indices");
    backward.template operator()<std::int64_t, 1>("input gradient, 64-bit indices");
    if (pairs_forward) forward.template operator()<std::int32_t, 2>("forward, channel pairs");
    if (pairs_backward) backward.template operator()<std::int32_t, 2>("input gradient, pairs");
  });
}

// The register-tiled kernels (depthwise_tiled_kernels.cuh) where the launchers take them: the same
// bits as the fixed-window plain kernel with channel pairs, in both accumulation modes.
template <typename T>
void expect_tiled_like_plain(const Case& c) {
  const DepthwiseGeometry g = geometry_of(c);
  if (g.multiplier != 1 || g.channels % 2 != 0 || g.dilation_h != 1) return;
  const auto& [x, w, b, dy, xe, we, be, dye] = Operands<T>(g, 21);
  const auto same_bits = [](const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  };
  for_each_window(g, [&]<int K, int S>() {
    if constexpr (K > 0) {
      for (bool round_each : {false, true}) {
        SCOPED_TRACE(std::string("K ") + std::to_string(K) + " S " + std::to_string(S) +
                     (round_each ? ", rounding each step" : ""));
        std::vector<T> plain(dy.size()), tiled(dy.size());
        run_grid(kGridThreads, [&] {
          forward_kernel<T, std::int32_t, 2, K, S>(g, x.data(), w.data(), b.data(), plain.data(),
                                                   round_each);
        });
        run_grid(kGridThreads, [&] {
          forward_tiled_kernel<T, K, S>(g, x.data(), w.data(), b.data(), tiled.data(), round_each);
        });
        EXPECT_TRUE(same_bits(tiled, plain)) << "forward";
        if constexpr (S == 1) {
          std::vector<T> plain_dx(x.size()), tiled_dx(x.size());
          run_grid(kGridThreads, [&] {
            backward_data_kernel<T, std::int32_t, 2, K, 1>(g, dy.data(), w.data(), plain_dx.data(),
                                                           round_each);
          });
          run_grid(kGridThreads, [&] {
            backward_data_tiled_kernel<T, K>(g, dy.data(), w.data(), tiled_dx.data(), round_each);
          });
          EXPECT_TRUE(same_bits(tiled_dx, plain_dx)) << "input gradient";
        }
      }
    }
  });
}

// The filter gradient as the launcher runs it: depthwise_filter_chunks' chunks, the all-taps pass
// (both channel groupings where it applies) or the per-(tap, channel) pass, then the finish.
template <typename T>
void expect_filter_gradient(const Case& c) {
  const DepthwiseGeometry g = geometry_of(c);
  const std::int64_t cm = g.channels * g.multiplier;
  const auto& [x, w, b, dy, xe, we, be, dye] = Operands<T>(g, 5);
  const Exact e = exact_of(g, xe, we, be, dye);
  const std::int64_t chunks = depthwise_filter_chunks(g, Accumulation::float32);
  const std::int64_t e_count = static_cast<std::int64_t>(w.size());
  const std::int64_t pixels = g.batch * g.out_h * g.out_w;
  const double terms = static_cast<double>(pixels);
  const auto finish = [&](std::vector<compute_t<T>>& partials, const char* what) {
    std::vector<T> dw(w.size());
    run_grid(kGridThreads,
             [&] { filter_finish_kernel<T>(partials.data(), chunks, e_count, dw.data()); });
    EXPECT_TRUE(within_exact(dw, e.dw, e.dw_m, terms)) << what << ", " << chunks << " chunks";
  };
  const bool taps = g.multiplier == 1 && (g.kernel_h == 3 || g.kernel_h == 5);
  if (taps) {
    const std::int64_t per_chunk = (pixels + chunks - 1) / chunks;
    const auto run = [&]<int K, int V>() {
      if (V == 2 && g.channels % 2 != 0) return;
      // Poisoned: every slot must be written.
      std::vector<compute_t<T>> partials(chunks * e_count, compute_t<T>(1e30));
      run_grid(kGridThreads, [&] {
        filter_taps_kernel<T, K, V, 0>(g, x.data(), dy.data(), partials.data(), chunks, per_chunk);
      });
      finish(partials, V == 2 ? "all taps, channel pairs" : "all taps, single channels");
      // The sliding window where the launcher takes it: the same partial sums, bit for bit.
      if (g.dilation_w != 1 || g.stride_w > 2) return;
      std::vector<compute_t<T>> slid(chunks * e_count, compute_t<T>(1e30));
      run_grid(kGridThreads, [&] {
        g.stride_w == 1
            ? filter_taps_kernel<T, K, V, 1>(g, x.data(), dy.data(), slid.data(), chunks, per_chunk)
            : filter_taps_kernel<T, K, V, 2>(g, x.data(), dy.data(), slid.data(), chunks,
                                             per_chunk);
      });
      EXPECT_EQ(std::memcmp(slid.data(), partials.data(), slid.size() * sizeof(slid[0])), 0)
          << "sliding window, " << (V == 2 ? "channel pairs" : "single channels");
    };
    if (g.kernel_h == 3) run.template operator()<3, 1>(), run.template operator()<3, 2>();
    if (g.kernel_h == 5) run.template operator()<5, 1>(), run.template operator()<5, 2>();
  } else {
    std::vector<compute_t<T>> partials(chunks * e_count, compute_t<T>(1e30));
    run_grid(kGridThreads, [&] {
      filter_partials_kernel<T>(g, x.data(), dy.data(), partials.data(), chunks, false);
    });
    finish(partials, "per (tap, channel)");
  }
}

// Host values of a rounded input as a CPU tensor of `dtype` (exact: they are dtype values).
Tensor cpu_tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  Tensor t = from_vector(values, shape, {.dtype = dtype});
  t.set_requires_grad(true);
  return t;
}

template <typename T>
::testing::AssertionResult equal_values(const std::vector<T>& got, const Tensor& want) {
  const std::vector<double> w = want.to(DType::float64).to_vector<double>();
  if (w.size() != got.size()) return ::testing::AssertionFailure() << "size " << w.size();
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double g = static_cast<double>(to_compute(got[i]));
    if (!(g == w[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " vs " << w[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// 16-bit accumulation: the kernels (one chunk, every partial sum rounded) give the CPU library's
// values (depthwise_conv2d with Accumulation::compute_dtype) exactly.
template <typename T>
void expect_sixteen_bit_accumulation(const Case& c, DType dtype) {
  const DepthwiseGeometry g = geometry_of(c);
  const std::int64_t cm = g.channels * g.multiplier;
  const auto& [x, w, b, dy, xe, we, be, dye] = Operands<T>(g, 9, 0.5, 1.5);
  Conv2dOptions options;
  options.strides = {static_cast<int>(c.stride), static_cast<int>(c.stride)};
  options.dilation = {static_cast<int>(c.dilation), static_cast<int>(c.dilation)};
  options.padding = c.same ? Padding::same : Padding::valid;
  options.accumulation = Accumulation::compute_dtype;
  const std::vector<Tensor> in = {
      cpu_tensor(xe, Shape{g.batch, g.in_h, g.in_w, g.channels}, dtype),
      cpu_tensor(we, Shape{g.kernel_h, g.kernel_w, g.channels, g.multiplier}, dtype),
      cpu_tensor(be, Shape{cm}, dtype)};
  const Tensor y_cpu = depthwise_conv2d(in[0], in[1], in[2], options);
  const std::vector<Tensor> g_cpu =
      grad(y_cpu, in, from_vector(dye, y_cpu.shape(), {.dtype = dtype}));
  ASSERT_EQ(depthwise_filter_chunks(g, Accumulation::compute_dtype), 1);
  for_each_window(g, [&]<int K, int S>() {
    std::vector<T> y(dy.size()), dx(x.size()), dw(w.size());
    run_grid(kGridThreads, [&] {
      forward_kernel<T, std::int32_t, 1, K, S>(g, x.data(), w.data(), b.data(), y.data(), true);
    });
    EXPECT_TRUE(equal_values(y, y_cpu)) << "forward K " << K << " S " << S;
    run_grid(kGridThreads, [&] {
      backward_data_kernel<T, std::int32_t, 1, K, S>(g, dy.data(), w.data(), dx.data(), true);
    });
    EXPECT_TRUE(equal_values(dx, g_cpu[0])) << "input gradient K " << K << " S " << S;
  });
  std::vector<compute_t<T>> partials(w.size(), compute_t<T>(1e30));
  std::vector<T> dw(w.size());
  run_grid(kGridThreads,
           [&] { filter_partials_kernel<T>(g, x.data(), dy.data(), partials.data(), 1, true); });
  run_grid(kGridThreads, [&] {
    filter_finish_kernel<T>(partials.data(), 1, static_cast<std::int64_t>(w.size()), dw.data());
  });
  EXPECT_TRUE(equal_values(dw, g_cpu[1])) << "filter gradient";
}

template <typename T>
void expect_all(DType dtype) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name + " in " + std::string(dtype_name(dtype)));
    expect_forward_and_input_gradient<T>(c);
    expect_filter_gradient<T>(c);
    if constexpr (sizeof(T) <= 4) expect_tiled_like_plain<T>(c);
  }
}

TEST(CudaDepthwiseEmulationTest, Float32KernelsStayWithinTheExactBound) {
  expect_all<float>(DType::float32);
}
TEST(CudaDepthwiseEmulationTest, Float16KernelsStayWithinTheExactBound) {
  expect_all<float16>(DType::float16);
}
TEST(CudaDepthwiseEmulationTest, Bfloat16KernelsStayWithinTheExactBound) {
  expect_all<bfloat16>(DType::bfloat16);
}
TEST(CudaDepthwiseEmulationTest, Float64KernelsStayWithinTheExactBound) {
  expect_all<double>(DType::float64);
}

TEST(CudaDepthwiseEmulationTest, SixteenBitAccumulationGivesTheCpuLibrarysValues) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    expect_sixteen_bit_accumulation<float16>(c, DType::float16);
    expect_sixteen_bit_accumulation<bfloat16>(c, DType::bfloat16);
  }
}

}  // namespace
}  // namespace mixprec::cuda::kernels
