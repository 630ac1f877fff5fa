// The sums of the middle axis of a contiguous x (outer, length, cols) -> (outer, cols), times a
// scale: bias gradients (outer 1: the sum over N, H, W of an NHWC gradient) and global average
// pooling (outer N). Launched by reduce.cu for ReduceOp::sum; in a header of its own so that a
// host emulation runs it (tests/unit/cuda_column_sums_emulation_test.cpp): it uses only names that
// common.cuh defines for the device and tests/support/cuda_host_emulation.h for the host
// (global_thread, kWarp, warp_lane, warp_ordered_sum, compute_t, to_compute, from_compute,
// MIXPREC_UNROLL; Lanes from lanes.cuh). Include after one of those two headers.
//
// Two deterministic passes, as batch normalization's: thread (o, part, lane) sums the rows part,
// part + parts, ... of item o for one 16-byte vector of columns (V of them; V = 1 where cols or
// the pointer do not allow vectors), in float runs of kRun rows folded into double (the
// accumulation of the other reduce kernels and of the CPU), and writes one double per column;
// then one warp per output adds its parts in warp_ordered_sum's fixed order. The first pass keeps
// several 16-byte loads in flight per thread: the one-element-per-thread column kernel it
// replaces for sums ran far below the memory bandwidth on the EfficientNet bias gradients.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"

namespace mixprec::cuda::kernels::column_sums_kernels {

// Rows a float run adds before it is folded into the double total.
inline constexpr int kRun = 64;

// Index of the partial of column c of item o, part p: [outer][cols][parts], each output's parts
// contiguous for its warp.
__device__ __forceinline__ std::int64_t column_partial_index(std::int64_t o, std::int64_t c,
                                                             std::int64_t p, std::int64_t cols,
                                                             std::int64_t parts) {
  return (o * cols + c) * parts + p;
}

// Pass 1: outer * parts * (cols / V) threads (whole blocks; threads past them return).
template <typename T, int V>
__global__ void column_partials_kernel(const T* __restrict__ x, std::int64_t outer,
                                       std::int64_t length, std::int64_t cols, std::int64_t parts,
                                       double* __restrict__ partials) {
  using C = compute_t<T>;
  const std::int64_t lanes = cols / V;
  const std::int64_t t = global_thread();
  if (t >= outer * parts * lanes) return;
  const std::int64_t c0 = (t % lanes) * V, p = (t / lanes) % parts, o = t / (lanes * parts);
  const T* item = x + o * length * cols + c0;
  double total[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) total[v] = 0.0;
  for (std::int64_t r = p; r < length;) {
    // One float run: up to kRun of this thread's rows, loads unrolled (no branch inside).
    const std::int64_t run_end = r + kRun * parts < length ? r + kRun * parts : length;
    C run[V];
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) run[v] = C(0);
    MIXPREC_UNROLL(8)
    for (; r < run_end; r += parts) {
      const Lanes<T, V> xv = load_lanes<T, V>(item + r * cols);
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) run[v] += to_compute(xv.v[v]);
    }
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) total[v] += static_cast<double>(run[v]);
  }
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) partials[column_partial_index(o, c0 + v, p, cols, parts)] = total[v];
}

// Pass 2: one warp per output (outputs * kWarp threads, whole blocks; the warps past them return
// whole): out[w] = round(sum of its parts * scale).
template <typename T>
__global__ void column_finish_kernel(const double* __restrict__ partials, std::int64_t outputs,
                                     std::int64_t parts, double scale, T* __restrict__ out) {
  const std::int64_t w = global_thread() / kWarp;
  if (w >= outputs) return;  // the whole warp
  const double total = warp_ordered_sum(partials + w * parts, parts, 1);
  if (warp_lane() == 0) out[w] = from_compute<T>(static_cast<compute_t<T>>(total * scale));
}

}  // namespace mixprec::cuda::kernels::column_sums_kernels
