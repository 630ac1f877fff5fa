// The batch-normalization kernels (launched by batch_norm.cu; see batch_norm.h), in a header of
// their own so that a host emulation can run them on the CPU
// (tests/unit/cuda_batch_norm_emulation_test.cpp): they use only the names that
// depthwise_kernels.cuh lists, plus sqrt, block_ordered_sum, block_index and thread_in_block,
// defined by common.cuh (CUDA's) for the device and by
// tests/support/cuda_host_emulation.h for the host, and the elementwise kernels' per-element
// activations (kernel_math). Include after one of those two headers.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"
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

// Thread t = p * (C / V) + j sums, for each of the V channels c = j V, ..., j V + V - 1, the rows
// p, p + parts, p + 2 parts, ... in order. A warp reads consecutive V-value vectors of a row
// (coalesced), and the row loop is unrolled so that several loads are in flight: the pass is
// memory-bound. Writes partials[p * C + c] (and partials[parts * C + p * C + c] for `gradient`).
// V divides C; x and dy aligned to V values.
template <typename T, Sums W, typename Act, int V>
__global__ void partial_sums_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                    const compute_t<T>* __restrict__ mean, std::int64_t rows,
                                    std::int64_t channels, std::int64_t parts,
                                    compute_t<T>* __restrict__ partials,
                                    const compute_t<T>* __restrict__ scale,
                                    const compute_t<T>* __restrict__ shift) {
  using P = compute_t<T>;
  const std::int64_t lanes = channels / V;
  const std::int64_t t = global_thread();
  if (t >= parts * lanes) return;
  const std::int64_t p = t / lanes, c0 = (t % lanes) * V;
  P s0[V], s1[V], m[V], k[V], b[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    s0[v] = s1[v] = P(0);
    m[v] = W == Sums::x ? P(0) : mean[c0 + v];
    k[v] = Act::kFused ? scale[c0 + v] : P(0);
    b[v] = Act::kFused ? shift[c0 + v] : P(0);
  }
  MIXPREC_UNROLL(8)
  for (std::int64_t r = p; r < rows; r += parts) {
    const std::int64_t i = r * channels + c0;
    const Lanes<T, V> xv = load_lanes<T, V>(x + i);
    if constexpr (W == Sums::gradient) {
      const Lanes<T, V> gv = load_lanes<T, V>(dy + i);
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) {
        const P d = to_compute(xv.v[v]) - m[v];
        P g = to_compute(gv.v[v]);
        if constexpr (Act::kFused) g *= Act::derivative(d * k[v] + b[v]);
        s0[v] += g;
        s1[v] += g * d;
      }
    } else {
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) {
        const P value = to_compute(xv.v[v]);
        if constexpr (W == Sums::x) {
          s0[v] += value;
        } else {
          const P d = value - m[v];
          s0[v] += d * d;
        }
      }
    }
  }
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    partials[p * channels + c0 + v] = s0[v];
    if constexpr (W == Sums::gradient) partials[(parts + p) * channels + c0 + v] = s1[v];
  }
}

// The finishing kernels run one block of kThreads threads per channel (the block index).
// The total of quantity q for channel c, in double, in block_ordered_sum's fixed order. Called by
// every thread of the block of channel c; every thread gets the same bits.
template <typename P>
__device__ double channel_total(const P* partials, std::int64_t parts, std::int64_t channels, int q,
                                std::int64_t c) {
  return block_ordered_sum(partials + q * parts * channels + c, parts, channels);
}

template <typename P>
__global__ void mean_kernel(const P* __restrict__ partials, std::int64_t parts,
                            std::int64_t channels, std::int64_t rows, P* __restrict__ mean) {
  const std::int64_t c = block_index();
  if (c >= channels) return;  // the whole block
  const P m = static_cast<P>(channel_total(partials, parts, channels, 0, c) / double(rows));
  if (thread_in_block() == 0) mean[c] = m;
}

// partials null: variance given; else variance = total / rows. scale = gamma / sqrt(var + eps),
// as the CPU: inv = 1 / sqrt(var + eps) in P, then inv * gamma. One block per channel; thread 0
// writes.
template <typename P>
__global__ void scale_kernel(const P* __restrict__ partials, std::int64_t parts,
                             std::int64_t channels, std::int64_t rows, P* __restrict__ variance,
                             const P* __restrict__ gamma, P epsilon, P* __restrict__ scale) {
  const std::int64_t c = block_index();
  if (c >= channels) return;  // the whole block
  const bool writer = thread_in_block() == 0;
  P var;
  if (partials != nullptr) {  // the same for the whole grid: every thread reaches the sum
    var = static_cast<P>(channel_total(partials, parts, channels, 0, c) / double(rows));
    if (writer) variance[c] = var;
  } else {
    var = variance[c];
  }
  const P inv = P(1) / sqrt(var + epsilon);
  if (writer) scale[c] = inv * gamma[c];
}

// y = Act::value((x - mean) * scale + beta), rounded once; each thread V consecutive elements
// (one vector load and store; V divides C, so they are channels c0, ..., c0 + V - 1 of one row).
// I: the index type, 32-bit when the tensor allows (the per-element channel modulo is much of the
// arithmetic of these memory-bound kernels, and 64-bit division is several times slower).
template <typename T, typename I, typename Act, int V>
__global__ void normalize_kernel(const T* __restrict__ x, const compute_t<T>* __restrict__ mean,
                                 const compute_t<T>* __restrict__ scale,
                                 const compute_t<T>* __restrict__ beta, I total, I channels,
                                 T* __restrict__ y) {
  const I groups = total / V;
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V, c0 = i % channels;
    const Lanes<T, V> xv = load_lanes<T, V>(x + i);
    Lanes<T, V> yv;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const I c = c0 + v;
      // (x - mean) first: with |mean| >> std, x * scale + (beta - mean * scale) would cancel.
      yv.v[v] = from_compute<T>(Act::value((to_compute(xv.v[v]) - mean[c]) * scale[c] + beta[c]));
    }
    store_lanes<T, V>(y + i, yv);
  }
}

// coefficients: k (C), a (C), b (C) of dx = k (dz - a - (x - mean) b); the formulas of the CPU.
// One block per channel; thread 0 writes.
template <typename P>
__global__ void backward_coefficients_kernel(const P* __restrict__ partials, std::int64_t parts,
                                             std::int64_t channels, std::int64_t rows,
                                             const P* __restrict__ variance,
                                             const P* __restrict__ gamma, P epsilon,
                                             bool batch_statistics, P* __restrict__ coefficients,
                                             P* __restrict__ dgamma, P* __restrict__ dbeta) {
  const std::int64_t c = block_index();
  if (c >= channels) return;  // the whole block
  const double sum_g = channel_total(partials, parts, channels, 0, c);
  const double sum_gx = channel_total(partials, parts, channels, 1, c);
  if (thread_in_block() != 0) return;  // after the block's sums
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
// shift read only for a fused activation); V consecutive elements per thread as normalize_kernel.
template <typename T, typename I, typename Act, int V>
__global__ void backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const compute_t<T>* __restrict__ mean,
                                   const compute_t<T>* __restrict__ coefficients, I total,
                                   I channels, T* __restrict__ dx,
                                   const compute_t<T>* __restrict__ scale,
                                   const compute_t<T>* __restrict__ shift) {
  using P = compute_t<T>;
  const I groups = total / V;
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V, c0 = i % channels;
    const Lanes<T, V> xv = load_lanes<T, V>(x + i), gv = load_lanes<T, V>(dy + i);
    Lanes<T, V> out;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const I c = c0 + v;
      const P k = coefficients[c], a = coefficients[channels + c],
              b = coefficients[2 * channels + c];
      const P d = to_compute(xv.v[v]) - mean[c];
      P g = to_compute(gv.v[v]);
      if constexpr (Act::kFused) g *= Act::derivative(d * scale[c] + shift[c]);
      out.v[v] = from_compute<T>(k * (g - a - d * b));
    }
    store_lanes<T, V>(dx + i, out);
  }
}

}  // namespace mixprec::cuda::kernels::batch_norm_kernels
