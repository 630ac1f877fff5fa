// V adjacent values of one storage type moved as one memory access of V * sizeof(T) bytes (two
// 16-bit values as one 4-byte load): the kernels' vector loads of channel pairs. Plain C++ apart
// from the device qualifiers, so host emulations of the kernels can use it too
// (tests/support/cuda_host_emulation.h).
#pragma once

namespace mixprec::cuda::kernels {

template <typename T, int V>
struct alignas(V * sizeof(T)) Lanes {
  T v[V];
};

// p must be aligned to V * sizeof(T).
template <typename T, int V>
__device__ __forceinline__ Lanes<T, V> load_lanes(const T* p) {
  return *reinterpret_cast<const Lanes<T, V>*>(p);
}
template <typename T, int V>
__device__ __forceinline__ void store_lanes(T* p, const Lanes<T, V>& values) {
  *reinterpret_cast<Lanes<T, V>*>(p) = values;
}

}  // namespace mixprec::cuda::kernels
