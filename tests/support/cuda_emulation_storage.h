// The storage-type helpers of the CUDA kernels (common.cuh's compute_t, to_compute, from_compute)
// for the host emulations (cuda_host_emulation.h, cuda_block_emulation.h): float and double as
// themselves, mixprec's float16 / bfloat16 for __half / __nv_bfloat16 with the same
// round-to-nearest-even conversions.
#pragma once

#include <type_traits>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::cuda::kernels {

template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

inline float to_compute(float v) { return v; }
inline double to_compute(double v) { return v; }
inline float to_compute(float16 v) { return static_cast<float>(v); }
inline float to_compute(bfloat16 v) { return static_cast<float>(v); }

template <typename T>
T from_compute(compute_t<T> v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return T(v);
  } else {
    return v;
  }
}

}  // namespace mixprec::cuda::kernels
