// Batch-normalization kernels (see batch_norm.h). Per-channel sums in two deterministic steps:
// partial sums by (part, channel) threads in the statistics type P, then one warp per channel
// adding the parts in double in warp_ordered_sum's fixed order (common.cuh): the same bits on every
// run, no atomics. The elementwise kernels compute in P and round once.
#include "backend/cuda/batch_norm.h"
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

// Quantities summed per channel: x; (x - mean)^2; dy and dy (x - mean) (two outputs).
enum class Sums { x, squared_deviation, gradient };

// Thread t = p * C + c sums rows p, p + parts, ...: at step k it reads element t + k * parts * C,
// so a warp reads consecutive addresses. partials[t] (and partials[parts * C + t] for `gradient`).
template <typename T>
__global__ void partial_sums_kernel(Sums what, const T* __restrict__ x, const T* __restrict__ dy,
                                    const compute_t<T>* __restrict__ mean, std::int64_t rows,
                                    std::int64_t channels, std::int64_t parts,
                                    compute_t<T>* __restrict__ partials) {
  using P = compute_t<T>;
  const std::int64_t t = global_thread();
  const std::int64_t width = parts * channels;
  if (t >= width) return;
  const std::int64_t c = t % channels;
  const std::int64_t total = rows * channels;
  P s0 = P(0), s1 = P(0);
  const P m = mean != nullptr ? mean[c] : P(0);
  for (std::int64_t i = t; i < total; i += width) {
    const P v = to_compute(x[i]);
    if (what == Sums::x) {
      s0 += v;
    } else if (what == Sums::squared_deviation) {
      const P d = v - m;
      s0 += d * d;
    } else {
      const P g = to_compute(dy[i]);
      s0 += g;
      s1 += g * (v - m);
    }
  }
  partials[t] = s0;
  if (what == Sums::gradient) partials[width + t] = s1;
}

// The finishing kernels run one warp per channel: kChannelsPerBlock channels per kThreads block.
constexpr int kChannelsPerBlock = kThreads / kWarp;

// This warp's channel (the same for all its lanes, so a warp returns as a whole).
__device__ __forceinline__ std::int64_t warp_channel() { return global_thread() / kWarp; }

// The total of quantity q for channel c, in double, in warp_ordered_sum's fixed order. Called by
// all 32 lanes of the warp of channel c; every lane returns the same bits.
template <typename P>
__device__ double channel_total(const P* partials, std::int64_t parts, std::int64_t channels, int q,
                                std::int64_t c) {
  return warp_ordered_sum(partials + q * parts * channels + c, parts, channels);
}

template <typename P>
__global__ void mean_kernel(const P* __restrict__ partials, std::int64_t parts,
                            std::int64_t channels, std::int64_t rows, P* __restrict__ mean) {
  const std::int64_t c = warp_channel();
  if (c >= channels) return;  // the whole warp
  const P m = static_cast<P>(channel_total(partials, parts, channels, 0, c) / double(rows));
  if (warp_lane() == 0) mean[c] = m;
}

// partials null: variance given; else variance = total / rows. scale = gamma / sqrt(var + eps),
// as the CPU: inv = 1 / sqrt(var + eps) in P, then inv * gamma.
// One warp per channel; lane 0 writes.
template <typename P>
__global__ void scale_kernel(const P* __restrict__ partials, std::int64_t parts,
                             std::int64_t channels, std::int64_t rows, P* __restrict__ variance,
                             const P* __restrict__ gamma, P epsilon, P* __restrict__ scale) {
  const std::int64_t c = warp_channel();
  if (c >= channels) return;  // the whole warp
  const bool writer = warp_lane() == 0;
  P var;
  if (partials != nullptr) {  // the same for the whole grid: every lane reaches the shuffles
    var = static_cast<P>(channel_total(partials, parts, channels, 0, c) / double(rows));
    if (writer) variance[c] = var;
  } else {
    var = variance[c];
  }
  const P inv = P(1) / sqrt(var + epsilon);
  if (writer) scale[c] = inv * gamma[c];
}

// I: the index type, 32-bit when the tensor allows (the per-element channel modulo is most of
// the arithmetic of these memory-bound kernels, and 64-bit division is several times slower).
template <typename T, typename I>
__global__ void normalize_kernel(const T* __restrict__ x, const compute_t<T>* __restrict__ mean,
                                 const compute_t<T>* __restrict__ scale,
                                 const compute_t<T>* __restrict__ beta, I total, I channels,
                                 T* __restrict__ y) {
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % channels;
    // (x - mean) first: with |mean| >> std, x * scale + (beta - mean * scale) would cancel.
    y[i] = from_compute<T>((to_compute(x[i]) - mean[c]) * scale[c] + beta[c]);
  }
}

// coefficients: k (C), a (C), b (C) of dx = k (dy - a - (x - mean) b); the formulas of the CPU.
// One warp per channel; lane 0 writes.
template <typename P>
__global__ void backward_coefficients_kernel(const P* __restrict__ partials, std::int64_t parts,
                                             std::int64_t channels, std::int64_t rows,
                                             const P* __restrict__ variance,
                                             const P* __restrict__ gamma, P epsilon,
                                             bool batch_statistics, P* __restrict__ coefficients,
                                             P* __restrict__ dgamma, P* __restrict__ dbeta) {
  const std::int64_t c = warp_channel();
  if (c >= channels) return;  // the whole warp
  const double sum_g = channel_total(partials, parts, channels, 0, c);
  const double sum_gx = channel_total(partials, parts, channels, 1, c);
  if (warp_lane() != 0) return;  // after the shuffles
  const P inv_std = P(1) / sqrt(variance[c] + epsilon);
  const double inv = inv_std;
  dbeta[c] = static_cast<P>(sum_g);
  dgamma[c] = static_cast<P>(sum_gx * inv);
  coefficients[c] = gamma[c] * inv_std;
  coefficients[channels + c] = batch_statistics ? static_cast<P>(sum_g / double(rows)) : P(0);
  coefficients[2 * channels + c] =
      batch_statistics ? static_cast<P>(sum_gx * inv * inv / double(rows)) : P(0);
}

template <typename T, typename I>
__global__ void backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const compute_t<T>* __restrict__ mean,
                                   const compute_t<T>* __restrict__ coefficients, I total,
                                   I channels, T* __restrict__ dx) {
  using P = compute_t<T>;
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % channels;
    const P k = coefficients[c], a = coefficients[channels + c], b = coefficients[2 * channels + c];
    dx[i] = from_compute<T>(k * (to_compute(dy[i]) - a - (to_compute(x[i]) - mean[c]) * b));
  }
}

// About this many threads sum partials: a few waves on current GPUs; each sums rows / parts rows.
constexpr std::int64_t kPartialThreads = std::int64_t{1} << 17;

// Room for one grid stride past the end: a 32-bit index never overflows.
bool fits_int32(std::int64_t total) { return total < (std::int64_t{1} << 30); }

unsigned blocks_exact(std::int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// The finishing kernels' grid: one warp per channel.
unsigned blocks_per_channel_warp(std::int64_t channels) {
  return static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock);
}

}  // namespace

std::int64_t batch_norm_parts(std::int64_t rows, std::int64_t channels) {
  std::int64_t parts = kPartialThreads / (channels > 0 ? channels : 1);
  if (parts > rows) parts = rows;
  return parts < 1 ? 1 : parts;
}

void batch_norm_mean(DType dtype, const void* x, std::int64_t rows, std::int64_t channels,
                     void* partials, void* mean, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    partial_sums_kernel<T><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
        Sums::x, static_cast<const T*>(x), nullptr, nullptr, rows, channels, parts,
        static_cast<P*>(partials));
    check_launch("batch_norm partial sums");
    mean_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(mean));
  });
  check_launch("batch_norm mean");
}

void batch_norm_variance(DType dtype, const void* x, const void* mean, const void* gamma,
                         double epsilon, std::int64_t rows, std::int64_t channels, void* partials,
                         void* variance, void* scale, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    partial_sums_kernel<T><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
        Sums::squared_deviation, static_cast<const T*>(x), nullptr, static_cast<const P*>(mean),
        rows, channels, parts, static_cast<P*>(partials));
    check_launch("batch_norm partial sums");
    scale_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(variance),
        static_cast<const P*>(gamma), static_cast<P>(epsilon), static_cast<P*>(scale));
  });
  check_launch("batch_norm variance");
}

void batch_norm_scale(DType dtype, const void* variance, const void* gamma, double epsilon,
                      std::int64_t channels, void* scale, cudaStream_t s) {
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    // partials == nullptr: the variance is read, never written.
    scale_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
        nullptr, 0, channels, 0, const_cast<P*>(static_cast<const P*>(variance)),
        static_cast<const P*>(gamma), static_cast<P>(epsilon), static_cast<P*>(scale));
  });
  check_launch("batch_norm scale");
}

void batch_norm_normalize(DType dtype, const void* x, const void* mean, const void* scale,
                          const void* beta, std::int64_t rows, std::int64_t channels, void* y,
                          cudaStream_t s) {
  const std::int64_t total = rows * channels;
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    const auto go = [&]<typename I>() {
      normalize_kernel<T, I><<<blocks_for(total), kThreads, 0, s>>>(
          static_cast<const T*>(x), static_cast<const P*>(mean), static_cast<const P*>(scale),
          static_cast<const P*>(beta), static_cast<I>(total), static_cast<I>(channels),
          static_cast<T*>(y));
    };
    fits_int32(total) ? go.template operator()<std::int32_t>()
                      : go.template operator()<std::int64_t>();
  });
  check_launch("batch_norm normalize");
}

void batch_norm_backward(DType dtype, const void* dy, const void* x, const void* mean,
                         const void* variance, const void* gamma, double epsilon,
                         bool batch_statistics, std::int64_t rows, std::int64_t channels,
                         void* partials, void* coefficients, void* dgamma, void* dbeta, void* dx,
                         cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  const std::int64_t total = rows * channels;
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    partial_sums_kernel<T><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
        Sums::gradient, static_cast<const T*>(x), static_cast<const T*>(dy),
        static_cast<const P*>(mean), rows, channels, parts, static_cast<P*>(partials));
    check_launch("batch_norm backward partial sums");
    backward_coefficients_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<const P*>(variance),
        static_cast<const P*>(gamma), static_cast<P>(epsilon), batch_statistics,
        static_cast<P*>(coefficients), static_cast<P*>(dgamma), static_cast<P*>(dbeta));
    check_launch("batch_norm backward coefficients");
    const auto go = [&]<typename I>() {
      backward_dx_kernel<T, I><<<blocks_for(total), kThreads, 0, s>>>(
          static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const P*>(mean),
          static_cast<const P*>(coefficients), static_cast<I>(total), static_cast<I>(channels),
          static_cast<T*>(dx));
    };
    fits_int32(total) ? go.template operator()<std::int32_t>()
                      : go.template operator()<std::int64_t>();
  });
  check_launch("batch_norm backward dx");
}

}  // namespace mixprec::cuda::kernels
