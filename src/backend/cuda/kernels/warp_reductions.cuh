// Warp reductions of a term over a warp's strided items, for kernels that give a whole warp to one
// row (kernels/sparse_crossentropy_kernels.cuh): the device side. Include after common.cuh; the
// host emulation (tests/support/cuda_host_emulation.h) defines the same two names with the same
// orders. Kept out of common.cuh so that adding them recompiles only their users.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

// warp_ordered_sum of term(k) instead of a strided array: lane l adds term(k) for k = l, l + 32,
// ... in double, then the butterfly over distances 16, 8, 4, 2, 1. The same order, the same bits
// on every lane and every run. All 32 lanes must call it with the same arguments.
template <typename Term>
__device__ __forceinline__ double warp_ordered_sum_of(std::int64_t count, Term&& term) {
  double s = 0.0;
#pragma unroll 4
  for (std::int64_t k = warp_lane(); k < count; k += kWarp) s += static_cast<double>(term(k));
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  return s;
}

// The largest term(k) for k in [0, count) by the 32 lanes of one warp (lane l takes k = l, l + 32,
// ..., then a butterfly of maxima); -inf when count is 0. NaN terms are passed over (a NaN is
// never greater), so the result does not depend on where a NaN lies. All 32 lanes must call it.
template <typename P, typename Term>
__device__ __forceinline__ P warp_max_of(std::int64_t count, Term&& term) {
  P m = -static_cast<P>(INFINITY);
#pragma unroll 4
  for (std::int64_t k = warp_lane(); k < count; k += kWarp) {
    const P v = term(k);
    m = v > m ? v : m;
  }
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) {
    const P other = __shfl_xor_sync(0xffffffffu, m, d);
    m = other > m ? other : m;
  }
  return m;
}

}  // namespace mixprec::cuda::kernels
