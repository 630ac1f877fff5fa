// Device-side helpers shared by the kernels: storage <-> compute conversions, 16-byte packs,
// strided offsets, launch geometry and the dtype switch of the launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels/launch.h"

namespace mixprec::cuda::kernels {

// ---- storage <-> compute: float for 16/32-bit floats, double for float64 ----
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ __forceinline__ float to_compute(float v) { return v; }
__device__ __forceinline__ double to_compute(double v) { return v; }
__device__ __forceinline__ float to_compute(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_compute(__nv_bfloat16 v) { return __bfloat162float(v); }

// Rounds once, to nearest even (overflow -> inf, NaN stays NaN), as the CPU conversions do.
template <typename T>
__device__ __forceinline__ T from_compute(compute_t<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

// ---- 16-byte vectors: 4 floats, 8 halves, 2 doubles per load/store instruction ----
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& pack) {
  *reinterpret_cast<Pack<T>*>(p) = pack;
}

// ---- strided offsets ----
// The offsets of each of K operands at linear position i of the row-major walk over plan.sizes.
// Index is std::uint32_t when plan.index32 (far cheaper division), std::int64_t otherwise.
template <typename Index, int K>
__device__ __forceinline__ void offsets_of(const Strided<K>& plan, Index i, Index (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  for (int d = plan.ndim - 1; d >= 0; --d) {
    const Index size = static_cast<Index>(plan.sizes[d]);
    const Index idx = d == 0 ? i : i % size;
    if (d != 0) i /= size;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += idx * static_cast<Index>(plan.strides[k][d]);
  }
}

// ---- launch geometry: grid-stride loops over `work` items with 256-thread blocks ----
inline constexpr int kThreads = 256;
inline unsigned blocks_for(std::int64_t work) {
  // Enough blocks to fill any current GPU several times over (H100: 132 SMs x 8 blocks of 256);
  // grid-stride loops cover the rest.
  constexpr std::int64_t kMaxBlocks = 4096;
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---- loop unrolling, spelled as macros so that a host emulation of a kernel can define them away
// (tests/support/cuda_host_emulation.h) ----
#define MIXPREC_PRAGMA(text) _Pragma(#text)
#define MIXPREC_UNROLL(n) MIXPREC_PRAGMA(unroll n)
#define MIXPREC_UNROLL_ALL MIXPREC_PRAGMA(unroll)

// ---- deterministic sums by one warp ----
inline constexpr int kWarp = 32;
static_assert(kThreads % kWarp == 0, "whole warps per block");

// This thread's lane in its warp.
__device__ __forceinline__ int warp_lane() { return static_cast<int>(threadIdx.x % kWarp); }

// The sum of v[k * stride] for k in [0, count), in double, by the 32 lanes of one warp in a fixed
// order: lane l adds k = l, l + 32, l + 64, ... in turn, then a butterfly of __shfl_xor_sync over
// lane distances 16, 8, 4, 2, 1 adds the 32 lane sums. At each butterfly step lanes l and l ^ d add
// the same two values (a + b and b + a: the same bits, IEEE addition commutes), so every lane
// returns the same bits, and the order depends only on `count`: the same result on every run, no
// atomics. All 32 lanes must call it (full mask) with the same arguments.
template <typename P>
__device__ __forceinline__ double warp_ordered_sum(const P* v, std::int64_t count,
                                                   std::int64_t stride) {
  double s = 0.0;
  // Unrolled: several loads in flight per lane; the additions stay in the order k, k + 32, ...
#pragma unroll 4
  for (std::int64_t k = warp_lane(); k < count; k += kWarp) s += static_cast<double>(v[k * stride]);
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  return s;
}

// The sum of term(k) for k in [0, count), in double, by the kThreads threads of one block
// (launched with blockDim.x == kThreads) in a fixed order: thread t adds k = t, t + kThreads, ...
// in turn; each warp adds its 32 sums by the butterfly of warp_ordered_sum; thread 0 adds the
// warps' sums in warp order. Every thread returns that total. All threads of the block must call
// it with the same count and the same terms (it synchronises the block).
template <typename Term>
__device__ __forceinline__ double block_ordered_sum(std::int64_t count, Term&& term) {
  __shared__ double warp_sums[kThreads / kWarp];
  __shared__ double total;
  double s = 0.0;
#pragma unroll 4
  for (std::int64_t k = threadIdx.x; k < count; k += kThreads) s += term(k);
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (warp_lane() == 0) warp_sums[threadIdx.x / kWarp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kThreads / kWarp; ++w) t += warp_sums[w];
    total = t;
  }
  __syncthreads();
  const double result = total;
  __syncthreads();  // the shared slots may be reused by a next call
  return result;
}

// This thread's block (the unit of block_ordered_sum) and its index in the block.
__device__ __forceinline__ std::int64_t block_index() { return blockIdx.x; }
__device__ __forceinline__ int thread_in_block() { return static_cast<int>(threadIdx.x); }

// True when every pointer is 16-byte aligned (the vector kernels' requirement).
inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Calls f.template operator()<T>() with T the device storage type of a floating dtype.
template <typename F>
void dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: f.template operator()<float>(); return;
    case DType::float16: f.template operator()<__half>(); return;
    case DType::bfloat16: f.template operator()<__nv_bfloat16>(); return;
    case DType::float64: f.template operator()<double>(); return;
    default: unsupported_dtype(op, dtype, "float32, float16, bfloat16, float64");
  }
}

// ---- any dtype, read as double / written from double (compare, is_finite, cast) ----
__device__ __forceinline__ double load_as_double(const void* base, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::float32: return static_cast<const float*>(base)[i];
    case DType::float16: return __half2float(static_cast<const __half*>(base)[i]);
    case DType::bfloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case DType::float64: return static_cast<const double*>(base)[i];
    case DType::int32: return static_cast<const std::int32_t*>(base)[i];
    case DType::int64: return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
    case DType::uint8: return static_cast<const std::uint8_t*>(base)[i];
    case DType::bool_: return static_cast<const bool*>(base)[i] ? 1.0 : 0.0;
  }
  return 0.0;
}

__device__ __forceinline__ bool is_integral_dtype(DType dtype) {
  return dtype == DType::int32 || dtype == DType::int64 || dtype == DType::uint8 ||
         dtype == DType::bool_;
}

}  // namespace mixprec::cuda::kernels
