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

// The normalization's scale gamma / sqrt(variance + epsilon) as the CPU computes it: inv =
// 1 / sqrt(variance + epsilon) in P, then inv * gamma. Every kernel that needs the scale computes
// it with this expression, so the forward and the backward see the same bits.
template <typename P>
__device__ __forceinline__ P scale_of(P variance, P gamma, P epsilon) {
  const P inv = P(1) / sqrt(variance + epsilon);
  return inv * gamma;
}

// The work split of every pass over x: a grid of parts * (C / V) threads, thread t owning the V
// channels c0 = (t % (C / V)) V, ..., c0 + V - 1 and the rows part, part + parts, part + 2 parts,
// ... with part = t / (C / V). A warp reads consecutive V-value vectors of a row, and of the next
// rows when C / V < 32 (coalesced); a thread's channels never change, so their per-channel
// parameters are loaded once, into registers. False for the threads past the grid's work.
struct Slot {
  std::int64_t part = 0, c0 = 0;
};
template <int V>
__device__ __forceinline__ bool slot_of(std::int64_t channels, std::int64_t parts, Slot& slot) {
  const std::int64_t lanes = channels / V;
  const std::int64_t t = global_thread();
  if (t >= parts * lanes) return false;
  slot.part = t / lanes;
  slot.c0 = (t % lanes) * V;
  return true;
}

// Index of partial q (0 or 1) of channel c and part p: [quantity][channel][part], so that the
// finishing block of a channel reads its parts contiguously.
__device__ __forceinline__ std::int64_t partial_index(int q, std::int64_t c, std::int64_t parts,
                                                      std::int64_t channels, std::int64_t p) {
  return (q * channels + c) * parts + p;
}

// Pass 1 of the statistics, one pass over x: Welford's recurrence over the thread's rows for each
// of its channels, on x - s with s the channel's value in the thread's first row (a sample of the
// data, so the running mean stays of the order of the deviations and its rounding does not grow
// with |mean|, as a two-pass variance's would not). Writes the part's mean s + m (rounded to P
// once) as partial 0 and its sum of squared deviations as partial 1.
template <typename T, int V>
__global__ void moments_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t channels,
                               std::int64_t parts, compute_t<T>* __restrict__ partials) {
  using P = compute_t<T>;
  Slot at;
  if (!slot_of<V>(channels, parts, at)) return;
  P shift[V], m[V], q[V];
  const Lanes<T, V> first = load_lanes<T, V>(x + at.part * channels + at.c0);
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) shift[v] = to_compute(first.v[v]), m[v] = q[v] = P(0);
  P n = P(0);  // the rows seen: exact in P up to 2^24 rows per part
  const std::int64_t step = parts * channels;
  MIXPREC_UNROLL(4)
  for (std::int64_t r = at.part, i = at.part * channels + at.c0; r < rows; r += parts, i += step) {
    n += P(1);
    const P inv = P(1) / n;
    const Lanes<T, V> xv = load_lanes<T, V>(x + i);
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const P value = to_compute(xv.v[v]) - shift[v];
      const P d = value - m[v];
      m[v] += d * inv;
      q[v] += d * (value - m[v]);
    }
  }
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    partials[partial_index(0, at.c0 + v, parts, channels, at.part)] = shift[v] + m[v];
    partials[partial_index(1, at.c0 + v, parts, channels, at.part)] = q[v];
  }
}

// Pass 2 of the statistics, one block of kThreads threads per channel (the block index): Chan's
// combination of the parts' moments in double, in block_ordered_sum's fixed order: the mean
// mu = sum(n_p m_p) / rows, then the biased variance (sum(M2_p) + sum(n_p (m_p - mu)^2)) / rows
// (no cancellation: every term is non-negative). n_p, the rows of part p, follows from the split.
template <typename P>
__global__ void statistics_kernel(const P* __restrict__ partials, std::int64_t parts,
                                  std::int64_t channels, std::int64_t rows, P* __restrict__ mean,
                                  P* __restrict__ variance) {
  const std::int64_t c = block_index();
  if (c >= channels) return;  // the whole block
  const P* m = partials + partial_index(0, c, parts, channels, 0);
  const P* q = partials + partial_index(1, c, parts, channels, 0);
  const auto count = [=](std::int64_t p) {
    return static_cast<double>((rows - p + parts - 1) / parts);
  };
  const double mu =
      block_ordered_sum(parts,
                        [=](std::int64_t p) { return count(p) * static_cast<double>(m[p]); }) /
      static_cast<double>(rows);
  const double m2 = block_ordered_sum(parts, [=](std::int64_t p) {
    const double d = static_cast<double>(m[p]) - mu;
    return static_cast<double>(q[p]) + count(p) * d * d;
  });
  if (thread_in_block() != 0) return;
  mean[c] = static_cast<P>(mu);
  variance[c] = static_cast<P>(m2 / static_cast<double>(rows));
}

// y = Act::value((x - mean) * scale + beta), rounded once; each thread V consecutive channels of
// its rows (the Slot split), with mean, scale and beta in registers.
template <typename T, typename Act, int V>
__global__ void normalize_kernel(const T* __restrict__ x, const compute_t<T>* __restrict__ mean,
                                 const compute_t<T>* __restrict__ variance,
                                 const compute_t<T>* __restrict__ gamma,
                                 const compute_t<T>* __restrict__ beta, compute_t<T> epsilon,
                                 std::int64_t rows, std::int64_t channels, std::int64_t parts,
                                 T* __restrict__ y) {
  using P = compute_t<T>;
  Slot at;
  if (!slot_of<V>(channels, parts, at)) return;
  P m[V], k[V], b[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    const std::int64_t c = at.c0 + v;
    m[v] = mean[c], k[v] = scale_of(variance[c], gamma[c], epsilon), b[v] = beta[c];
  }
  const std::int64_t step = parts * channels;
  MIXPREC_UNROLL(4)
  for (std::int64_t r = at.part, i = at.part * channels + at.c0; r < rows; r += parts, i += step) {
    const Lanes<T, V> xv = load_lanes<T, V>(x + i);
    Lanes<T, V> yv;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      // (x - mean) first: with |mean| >> std, x * scale + (beta - mean * scale) would cancel.
      yv.v[v] = from_compute<T>(Act::value((to_compute(xv.v[v]) - m[v]) * k[v] + b[v]));
    }
    store_lanes<T, V>(y + i, yv);
  }
}

// Pass 1 of the backward: per part and channel, sum(dz) (partial 0) and sum(dz (x - mean))
// (partial 1), dz = dy * Act::derivative(pre), pre = (x - mean) * scale + beta recomputed from x
// (variance, gamma and beta read only for a fused activation).
template <typename T, typename Act, int V>
__global__ void gradient_sums_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                     const compute_t<T>* __restrict__ mean,
                                     const compute_t<T>* __restrict__ variance,
                                     const compute_t<T>* __restrict__ gamma,
                                     const compute_t<T>* __restrict__ beta, compute_t<T> epsilon,
                                     std::int64_t rows, std::int64_t channels, std::int64_t parts,
                                     compute_t<T>* __restrict__ partials) {
  using P = compute_t<T>;
  Slot at;
  if (!slot_of<V>(channels, parts, at)) return;
  P s0[V], s1[V], m[V], k[V], b[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    const std::int64_t c = at.c0 + v;
    s0[v] = s1[v] = P(0);
    m[v] = mean[c];
    k[v] = Act::kFused ? scale_of(variance[c], gamma[c], epsilon) : P(0);
    b[v] = Act::kFused ? beta[c] : P(0);
  }
  const std::int64_t step = parts * channels;
  MIXPREC_UNROLL(4)
  for (std::int64_t r = at.part, i = at.part * channels + at.c0; r < rows; r += parts, i += step) {
    const Lanes<T, V> xv = load_lanes<T, V>(x + i), gv = load_lanes<T, V>(dy + i);
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const P d = to_compute(xv.v[v]) - m[v];
      P g = to_compute(gv.v[v]);
      if constexpr (Act::kFused) g *= Act::derivative(d * k[v] + b[v]);
      s0[v] += g;
      s1[v] += g * d;
    }
  }
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    partials[partial_index(0, at.c0 + v, parts, channels, at.part)] = s0[v];
    partials[partial_index(1, at.c0 + v, parts, channels, at.part)] = s1[v];
  }
}

// Pass 2 of the backward, one block per channel: coefficients k (C), a (C), b (C) of
// dx = k (dz - a - (x - mean) b), the formulas of the CPU, with k = scale_of(variance, gamma)
// (the forward's scale, bit for bit); dgamma and dbeta. Thread 0 writes.
template <typename P>
__global__ void backward_coefficients_kernel(const P* __restrict__ partials, std::int64_t parts,
                                             std::int64_t channels, std::int64_t rows,
                                             const P* __restrict__ variance,
                                             const P* __restrict__ gamma, P epsilon,
                                             bool batch_statistics, P* __restrict__ coefficients,
                                             P* __restrict__ dgamma, P* __restrict__ dbeta) {
  const std::int64_t c = block_index();
  if (c >= channels) return;  // the whole block
  const P* g = partials + partial_index(0, c, parts, channels, 0);
  const P* gx = partials + partial_index(1, c, parts, channels, 0);
  const double sum_g = block_ordered_sum(parts, [=](std::int64_t p) { return double(g[p]); });
  const double sum_gx = block_ordered_sum(parts, [=](std::int64_t p) { return double(gx[p]); });
  if (thread_in_block() != 0) return;  // after the block's sums
  const P inv_std = P(1) / sqrt(variance[c] + epsilon);
  const double inv = inv_std;
  dbeta[c] = static_cast<P>(sum_g);
  dgamma[c] = static_cast<P>(sum_gx * inv);
  coefficients[c] = inv_std * gamma[c];
  coefficients[channels + c] = batch_statistics ? static_cast<P>(sum_g / double(rows)) : P(0);
  coefficients[2 * channels + c] =
      batch_statistics ? static_cast<P>(sum_gx * inv * inv / double(rows)) : P(0);
}

// dx = k (dz - a - (x - mean) b), dz = dy * Act::derivative(pre) recomputed from x with the
// forward's scale (k itself) and beta (read only for a fused activation); the Slot split, the
// per-channel values in registers.
template <typename T, typename Act, int V>
__global__ void backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const compute_t<T>* __restrict__ mean,
                                   const compute_t<T>* __restrict__ coefficients,
                                   const compute_t<T>* __restrict__ beta, std::int64_t rows,
                                   std::int64_t channels, std::int64_t parts, T* __restrict__ dx) {
  using P = compute_t<T>;
  Slot at;
  if (!slot_of<V>(channels, parts, at)) return;
  P m[V], k[V], a[V], b[V], shift[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    const std::int64_t c = at.c0 + v;
    m[v] = mean[c], k[v] = coefficients[c], a[v] = coefficients[channels + c],
    b[v] = coefficients[2 * channels + c], shift[v] = Act::kFused ? beta[c] : P(0);
  }
  const std::int64_t step = parts * channels;
  MIXPREC_UNROLL(4)
  for (std::int64_t r = at.part, i = at.part * channels + at.c0; r < rows; r += parts, i += step) {
    const Lanes<T, V> xv = load_lanes<T, V>(x + i), gv = load_lanes<T, V>(dy + i);
    Lanes<T, V> out;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const P d = to_compute(xv.v[v]) - m[v];
      P g = to_compute(gv.v[v]);
      if constexpr (Act::kFused) g *= Act::derivative(d * k[v] + shift[v]);
      out.v[v] = from_compute<T>(k[v] * (g - a[v] - d * b[v]));
    }
    store_lanes<T, V>(dx + i, out);
  }
}

}  // namespace mixprec::cuda::kernels::batch_norm_kernels
