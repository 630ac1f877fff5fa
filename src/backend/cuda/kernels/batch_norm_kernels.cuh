// The batch-normalization kernels (launched by batch_norm.cu; see batch_norm.h), in a header of
// their own so that a host emulation can run them on the CPU
// (tests/unit/cuda_batch_norm_emulation_test.cpp): they use only the names that
// depthwise_kernels.cuh lists, plus sqrt, defined by common.cuh (CUDA's) for the device and by
// tests/support/cuda_host_emulation.h for the host, and the elementwise kernels' per-element
// activations (kernel_math). Include after one of those two headers.
#pragma once

#include <cstdint>

#include "backend/kernel_math/elementwise_math.h"
#include "core/op_kinds.h"

namespace mixprec::cuda::kernels::batch_norm_kernels {

// What follows the normalization: Identity (plain batch normalization) or Activation<A> (the
// fused batch normalization + activation, A relu, relu6, sigmoid or silu), applied to the
// pre-activation pre = (x - mean) * scale + beta in the statistics type with the elementwise
// kernels' value and derivative (as the CPU's fused kernels: pre and act(pre) in float, y rounded
// once; the backward's dz = dy * act'(pre) never rounded).
struct Identity {
  static constexpr bool kFused = false;
  template <typename P>
  __device__ __forceinline__ static P value(P pre) {
    return pre;
  }
  template <typename P>
  __device__ __forceinline__ static P derivative(P) {
    return P(1);
  }
};

template <UnaryOp A>
struct Activation {
  static constexpr bool kFused = true;
  template <typename P>
  __device__ __forceinline__ static P value(P pre) {
    return kernel_math::unary_value(A, pre);
  }
  template <typename P>
  __device__ __forceinline__ static P derivative(P pre) {
    return kernel_math::unary_derivative(A, pre, kernel_math::unary_value(A, pre));
  }
};

// Quantities summed per channel: x; (x - mean)^2; dz and dz (x - mean) (two outputs), with
// dz = dy * Act::derivative(pre) (dy itself for Identity; scale and shift are read only then).
enum class Sums { x, squared_deviation, gradient };

// Thread t = p * C + c sums rows p, p + parts, ...: at step k it reads element t + k * parts * C,
// so a warp reads consecutive addresses. partials[t] (and partials[parts * C + t] for `gradient`).
template <typename T, typename Act = Identity>
__global__ void partial_sums_kernel(Sums what, const T* __restrict__ x, const T* __restrict__ dy,
                                    const compute_t<T>* __restrict__ mean, std::int64_t rows,
                                    std::int64_t channels, std::int64_t parts,
                                    compute_t<T>* __restrict__ partials,
                                    const compute_t<T>* __restrict__ scale = nullptr,
                                    const compute_t<T>* __restrict__ shift = nullptr) {
  using P = compute_t<T>;
  const std::int64_t t = global_thread();
  const std::int64_t width = parts * channels;
  if (t >= width) return;
  const std::int64_t c = t % channels;
  const std::int64_t total = rows * channels;
  P s0 = P(0), s1 = P(0);
  const P m = mean != nullptr ? mean[c] : P(0);
  P k = P(0), b = P(0);
  if constexpr (Act::kFused) k = scale[c], b = shift[c];
  for (std::int64_t i = t; i < total; i += width) {
    const P v = to_compute(x[i]);
    if (what == Sums::x) {
      s0 += v;
    } else if (what == Sums::squared_deviation) {
      const P d = v - m;
      s0 += d * d;
    } else {
      P g = to_compute(dy[i]);
      if constexpr (Act::kFused) g *= Act::derivative((v - m) * k + b);
      s0 += g;
      s1 += g * (v - m);
    }
  }
  partials[t] = s0;
  if (what == Sums::gradient) partials[width + t] = s1;
}

// The finishing kernels run one warp per channel (kThreads / kWarp channels per block).
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

// y = Act::value((x - mean) * scale + beta), rounded once. I: the index type, 32-bit when the
// tensor allows (the per-element channel modulo is most of the arithmetic of these memory-bound
// kernels, and 64-bit division is several times slower).
template <typename T, typename I, typename Act = Identity>
__global__ void normalize_kernel(const T* __restrict__ x, const compute_t<T>* __restrict__ mean,
                                 const compute_t<T>* __restrict__ scale,
                                 const compute_t<T>* __restrict__ beta, I total, I channels,
                                 T* __restrict__ y) {
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % channels;
    // (x - mean) first: with |mean| >> std, x * scale + (beta - mean * scale) would cancel.
    y[i] = from_compute<T>(Act::value((to_compute(x[i]) - mean[c]) * scale[c] + beta[c]));
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

// dx = k (dz - a - (x - mean) b), dz = dy * Act::derivative(pre) recomputed from x (scale and
// shift read only for a fused activation).
template <typename T, typename I, typename Act = Identity>
__global__ void backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const compute_t<T>* __restrict__ mean,
                                   const compute_t<T>* __restrict__ coefficients, I total,
                                   I channels, T* __restrict__ dx,
                                   const compute_t<T>* __restrict__ scale = nullptr,
                                   const compute_t<T>* __restrict__ shift = nullptr) {
  using P = compute_t<T>;
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % channels;
    const P k = coefficients[c], a = coefficients[channels + c], b = coefficients[2 * channels + c];
    const P d = to_compute(x[i]) - mean[c];
    P g = to_compute(dy[i]);
    if constexpr (Act::kFused) g *= Act::derivative(d * scale[c] + shift[c]);
    dx[i] = from_compute<T>(k * (g - a - d * b));
  }
}

}  // namespace mixprec::cuda::kernels::batch_norm_kernels
