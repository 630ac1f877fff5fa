// The sparse softmax crossentropy's kernels (launched by sparse_crossentropy.cu; see
// cuda/sparse_crossentropy.h), in a header of their own so that a host emulation can run them on
// the CPU (tests/unit/cuda_sparse_crossentropy_emulation_test.cpp). Besides the names that
// depthwise_kernels.cuh lists they use block_ordered_sum, exp and log (common.cuh),
// warp_ordered_sum_of and warp_max_of (warp_reductions.cuh) on the device, all defined by
// tests/support/cuda_host_emulation.h for the host. Include after those headers.
#pragma once

#include <cmath>
#include <cstdint>

namespace mixprec::cuda::kernels::sparse_crossentropy_kernels {

// Pass 1, one warp per row r (warps w, w + warps, ... of a grid-stride loop) of logits
// (rows, classes): m = max(x), s = sum(exp(x - m)) in double in warp_ordered_sum's order,
// log_s = log(s) in the compute type P, and lane 0 writes loss[r] = -((x[label] - m) - log_s) and
// stats[r] = (m, log_s). A row whose label is `ignore` is not read: loss 0, stats (0, 0). A label
// outside [0, classes): loss NaN (the op cannot check labels on a GPU without waiting for it).
// The row is read twice (max, then the sum): the second read mostly hits L2.
template <typename T>
__global__ void rows_kernel(const T* __restrict__ logits, const std::int64_t* __restrict__ labels,
                            std::int64_t rows, std::int64_t classes, std::int64_t ignore,
                            compute_t<T>* __restrict__ loss, compute_t<T>* __restrict__ stats) {
  using P = compute_t<T>;
  const std::int64_t warps = grid_threads() / kWarp;
  for (std::int64_t r = global_thread() / kWarp; r < rows; r += warps) {
    const std::int64_t label = labels[r];
    if (label == ignore) {
      if (warp_lane() == 0) loss[r] = P(0), stats[2 * r] = P(0), stats[2 * r + 1] = P(0);
      continue;
    }
    const T* x = logits + r * classes;
    const P m = warp_max_of<P>(classes, [&](std::int64_t k) { return to_compute(x[k]); });
    const double s = warp_ordered_sum_of(classes, [&](std::int64_t k) {
      const P e = exp(to_compute(x[k]) - m);
      return e;
    });
    const P log_s = log(static_cast<P>(s));
    if (warp_lane() == 0) {
      const bool valid = label >= 0 && label < classes;
      loss[r] = valid ? -((to_compute(x[label]) - m) - log_s) : static_cast<P>(NAN);
      stats[2 * r] = m;
      stats[2 * r + 1] = log_s;
    }
  }
}

// Pass 2, one block of kThreads threads: the rows' losses and the count of rows not ignored, each
// by block_ordered_sum (double, a fixed order); thread 0 writes mean = total / count (0 when
// count is 0), rounded once to P, and count.
template <typename P>
__global__ void mean_kernel(const P* __restrict__ loss, const std::int64_t* __restrict__ labels,
                            std::int64_t rows, std::int64_t ignore, P* __restrict__ mean,
                            P* __restrict__ count_out) {
  if (block_index() != 0) return;  // the whole block
  const double total =
      block_ordered_sum(rows, [&](std::int64_t r) { return static_cast<double>(loss[r]); });
  const double count =
      block_ordered_sum(rows, [&](std::int64_t r) { return labels[r] == ignore ? 0.0 : 1.0; });
  if (thread_in_block() == 0) {
    *mean = count > 0 ? static_cast<P>(total / count) : P(0);
    *count_out = static_cast<P>(count);
  }
}

// The backward, one thread per element i = r * classes + k of a grid-stride loop:
// dx = p * scale - [k == label] * scale with p = exp((x - m) - log_s) and scale = g / count
// (as g times 1/count; 0 when count is 0), rounded once to T; 0 for a row left out, NaN for a row
// whose label is out of range. `g_count` holds g and count (the loss's gradient, the forward's
// count) on the device: read here, so nothing waits for the host.
template <typename T>
__global__ void backward_kernel(const T* __restrict__ logits,
                                const std::int64_t* __restrict__ labels, std::int64_t rows,
                                std::int64_t classes, std::int64_t ignore,
                                const compute_t<T>* __restrict__ stats,
                                const compute_t<T>* __restrict__ g,
                                const compute_t<T>* __restrict__ count, T* __restrict__ dx) {
  using P = compute_t<T>;
  const P n = *count;
  const P scale = n > P(0) ? *g * static_cast<P>(1.0 / static_cast<double>(n)) : P(0);
  const std::int64_t total = rows * classes;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t r = i / classes, k = i - r * classes;
    const std::int64_t label = labels[r];
    P d;
    if (label == ignore) {
      d = P(0);
    } else if (label < 0 || label >= classes) {
      d = static_cast<P>(NAN);
    } else {
      const P p = exp((to_compute(logits[i]) - stats[2 * r]) - stats[2 * r + 1]);
      d = k == label ? p * scale - scale : p * scale;
    }
    dx[i] = from_compute<T>(d);
  }
}

}  // namespace mixprec::cuda::kernels::sparse_crossentropy_kernels
