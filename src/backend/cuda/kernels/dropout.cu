// Dropout's masked multiply (see dropout.h): one counter hash per element, no stored mask. Each
// thread handles one 16-byte pack per step (4 floats, 8 halves, 2 doubles) when both pointers are
// 16-byte aligned, else single elements; the element index i alone decides the mask, so the
// geometry changes nothing in the result.
#include "backend/cuda/dropout.h"
#include "backend/cuda/kernels/common.cuh"
#include "core/counter_hash.h"

namespace mixprec::cuda::kernels {

namespace {

// A replayed step's key is in device memory (written before the replay); else the launch's.
__device__ __forceinline__ std::uint64_t key_of(std::uint64_t launched,
                                                const std::uint64_t* in_memory) {
  return in_memory != nullptr ? *in_memory : launched;
}

template <typename T>
__device__ __forceinline__ T masked(T x, std::uint64_t base, std::uint64_t i,
                                    std::uint64_t threshold, compute_t<T> keep) {
  // x * 0 (not a plain 0) for dropped elements: NaN and Inf stay visible, as in the CPU's x * mask.
  const compute_t<T> m = core::counter_keeps(base, i, threshold) ? keep : compute_t<T>(0);
  return from_compute<T>(to_compute(x) * m);
}

template <typename T>
__global__ void dropout_packs(const T* __restrict__ x, T* __restrict__ out, std::int64_t n,
                              std::uint64_t launched_base, const std::uint64_t* base_in_memory,
                              std::uint64_t threshold, compute_t<T> keep) {
  const std::uint64_t base = key_of(launched_base, base_in_memory);
  constexpr int K = Pack<T>::kSize;
  const std::int64_t packs = n / K;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    const Pack<T> in = load_pack(x + p * K);
    Pack<T> result;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      result.v[k] = masked(in.v[k], base, static_cast<std::uint64_t>(p * K + k), threshold, keep);
    }
    store_pack(out + p * K, result);
  }
  // The tail (fewer than K elements) by the first threads.
  const std::int64_t i = packs * K + global_thread();
  if (i < n) out[i] = masked(x[i], base, static_cast<std::uint64_t>(i), threshold, keep);
}

template <typename T>
__global__ void dropout_elements(const T* __restrict__ x, T* __restrict__ out, std::int64_t n,
                                 std::uint64_t launched_base, const std::uint64_t* base_in_memory,
                                 std::uint64_t threshold, compute_t<T> keep) {
  const std::uint64_t base = key_of(launched_base, base_in_memory);
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    out[i] = masked(x[i], base, static_cast<std::uint64_t>(i), threshold, keep);
  }
}

}  // namespace

void dropout_apply(DType dtype, const void* x, void* out, std::int64_t n, std::uint64_t base,
                   const std::uint64_t* base_in_memory, std::uint64_t threshold, double keep,
                   cudaStream_t s) {
  dispatch_floating(dtype, "dropout", [&]<typename T>() {
    const T* xp = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    // `keep` is exact in T (the caller's rounding), hence exact in compute_t<T> too.
    const compute_t<T> k = static_cast<compute_t<T>>(keep);
    if (aligned16(x) && aligned16(out)) {
      dropout_packs<T><<<blocks_for(n / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          xp, o, n, base, base_in_memory, threshold, k);
    } else {
      dropout_elements<T>
          <<<blocks_for(n), kThreads, 0, s>>>(xp, o, n, base, base_in_memory, threshold, k);
    }
  });
  check_launch("dropout");
}

}  // namespace mixprec::cuda::kernels
