// A host emulation of the few device names that the kernels of a *_kernels.cuh header use
// (src/backend/cuda/kernels/depthwise_kernels.cuh lists them), so that a unit test can run those
// kernels on the CPU, thread after thread, and check their indexing and summation orders without a
// GPU. It emulates kernels whose threads do not communicate, plus warp_ordered_sum, which it
// computes for the whole warp at once in the device's fixed order (lane sums, then the butterfly).
// Storage types: float, double, and mixprec's float16 / bfloat16 for __half / __nv_bfloat16 (the
// same round-to-nearest-even conversions). Include before the kernels' header, never with
// common.cuh.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"
#include "support/cuda_emulation_storage.h"

#undef __global__
#undef __device__
#undef __forceinline__
#define __global__
#define __device__
#define __forceinline__ inline
#define MIXPREC_UNROLL(n)
#define MIXPREC_UNROLL_ALL

namespace mixprec::cuda::kernels {

namespace emulation {
// The thread being run and the grid's size (run_grid sets them), and the number of grids run (a
// kernel launch's identity for block_ordered_sum's cache).
inline std::int64_t thread = 0, threads = 1, grids = 0;
}  // namespace emulation

// CUDA's sqrt(float) and sqrt(double) are correctly rounded (nvcc's default -prec-sqrt=true), as
// the host's.
using std::sqrt;
// exp and log: the CUDA math library's are within 2 ulp of the host's (not bit for bit).
using std::exp;
using std::log;

inline std::int64_t global_thread() { return emulation::thread; }
inline std::int64_t grid_threads() { return emulation::threads; }

inline constexpr int kWarp = 32;
inline int warp_lane() { return static_cast<int>(emulation::thread % kWarp); }

// common.cuh's warp_ordered_sum: lane l adds v[k * stride] for k = l, l + 32, ...; then at each
// butterfly distance d = 16, 8, 4, 2, 1 lane l adds lane l ^ d's sum to its own (the values of
// the step before). Every lane ends with the same bits; the caller's lane gets them.
template <typename P>
double warp_ordered_sum(const P* v, std::int64_t count, std::int64_t stride) {
  double lane[kWarp] = {};
  for (int l = 0; l < kWarp; ++l) {
    for (std::int64_t k = l; k < count; k += kWarp) lane[l] += static_cast<double>(v[k * stride]);
  }
  for (int d = kWarp / 2; d > 0; d /= 2) {
    double next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lane[l] + lane[l ^ d];
    for (int l = 0; l < kWarp; ++l) lane[l] = next[l];
  }
  return lane[warp_lane()];
}

// warp_reductions.cuh's warp_ordered_sum_of: warp_ordered_sum's order over term(k) (a pure function
// of k, called for the whole warp at once).
template <typename Term>
double warp_ordered_sum_of(std::int64_t count, Term&& term) {
  double lane[kWarp] = {};
  for (int l = 0; l < kWarp; ++l) {
    for (std::int64_t k = l; k < count; k += kWarp) lane[l] += static_cast<double>(term(k));
  }
  for (int d = kWarp / 2; d > 0; d /= 2) {
    double next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lane[l] + lane[l ^ d];
    for (int l = 0; l < kWarp; ++l) lane[l] = next[l];
  }
  return lane[warp_lane()];
}

// warp_reductions.cuh's warp_max_of: per-lane maxima, then the butterfly of maxima (NaN passed
// over).
template <typename P, typename Term>
P warp_max_of(std::int64_t count, Term&& term) {
  P lane[kWarp];
  for (int l = 0; l < kWarp; ++l) {
    lane[l] = -std::numeric_limits<P>::infinity();
    for (std::int64_t k = l; k < count; k += kWarp) {
      const P v = term(k);
      lane[l] = v > lane[l] ? v : lane[l];
    }
  }
  for (int d = kWarp / 2; d > 0; d /= 2) {
    P next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lane[l ^ d] > lane[l] ? lane[l ^ d] : lane[l];
    for (int l = 0; l < kWarp; ++l) lane[l] = next[l];
  }
  return lane[warp_lane()];
}

// The launchers' block size (common.cuh's kThreads).
inline constexpr int kThreads = 256;

inline std::int64_t block_index() { return emulation::thread / kThreads; }
inline int thread_in_block() { return static_cast<int>(emulation::thread % kThreads); }

// common.cuh's block_ordered_sum: thread t of the block adds term(k) for k = t, t + kThreads, ...;
// each warp's 32 sums by warp_ordered_sum's butterfly; then the warps' sums in warp order.
template <typename Term>
double block_ordered_sum(std::int64_t count, Term&& term) {
  // Every thread of a block asks for the same sums in the same order (the device's precondition):
  // the n-th call of a block is computed by its first thread and remembered for the others.
  struct Entry {
    std::int64_t grid = -1, block = -1, call = -1;
    double total = 0.0;
  };
  static Entry cache[8];
  static int next = 0;
  static std::int64_t caller = -1, grid_of_caller = -1, call = 0;
  if (emulation::thread != caller || emulation::grids != grid_of_caller) {
    caller = emulation::thread, grid_of_caller = emulation::grids, call = 0;
  }
  const std::int64_t this_call = call++;
  for (const Entry& e : cache) {
    if (e.grid == emulation::grids && e.block == block_index() && e.call == this_call) {
      return e.total;
    }
  }
  double total = 0.0;
  for (int w = 0; w < kThreads / kWarp; ++w) {
    double lane[kWarp] = {};
    for (int l = 0; l < kWarp; ++l) {
      for (std::int64_t k = w * kWarp + l; k < count; k += kThreads) lane[l] += term(k);
    }
    for (int d = kWarp / 2; d > 0; d /= 2) {
      double next_lane[kWarp];
      for (int l = 0; l < kWarp; ++l) next_lane[l] = lane[l] + lane[l ^ d];
      for (int l = 0; l < kWarp; ++l) lane[l] = next_lane[l];
    }
    total += lane[0];
  }
  cache[next] = Entry{emulation::grids, block_index(), this_call, total};
  next = (next + 1) % 8;
  return total;
}

// The threads of a launch of whole kThreads-thread blocks covering `threads` (the launchers'
// blocks_exact grids, whose kernels return early past their work).
inline std::int64_t block_grid(std::int64_t threads) {
  return (threads + kThreads - 1) / kThreads * kThreads;
}

// Half the spacing of T's numbers relative to a value: 2^-11 (float16), 2^-8 (bfloat16), 2^-24
// (float), 2^-53 (double).
template <typename T>
double unit_roundoff_of() {
  if constexpr (std::is_same_v<T, float16>) return 0x1p-11;
  if constexpr (std::is_same_v<T, bfloat16>) return 0x1p-8;
  if constexpr (std::is_same_v<T, double>) return 0x1p-53;
  return 0x1p-24;
}

// Runs body() once per thread of a grid of `threads` threads (a multiple of kWarp for kernels that
// sum by warps), in thread order.
template <typename Body>
void run_grid(std::int64_t threads, Body&& body) {
  emulation::threads = threads;
  ++emulation::grids;
  for (std::int64_t t = 0; t < threads; ++t) {
    emulation::thread = t;
    body();
  }
  emulation::thread = 0, emulation::threads = 1;
}

}  // namespace mixprec::cuda::kernels
