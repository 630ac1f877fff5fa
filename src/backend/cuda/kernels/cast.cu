// dtype conversion. The mixed-precision hot paths (float32 <-> float16/bfloat16, every weight cast
// of every step) have dense vectorised kernels; every other pair goes through one strided kernel
// that reads and writes any dtype at run time (a uniform switch per element), which keeps the
// 8 x 8 dtype pairs from becoming 64 kernel instantiations.
#include "backend/cuda/kernels/common.cuh"
#include "backend/kernel_math/cast_math.h"

namespace mixprec::cuda::kernels {

namespace {

// ---- dense float32 <-> 16-bit: 8 elements per thread step (32 bytes of float, 16 of half) ----
template <typename From, typename To>
__device__ __forceinline__ To convert_value(From v) {
  if constexpr (std::is_same_v<From, float>) {
    return from_compute<To>(v);
  } else {
    return to_compute(v);
  }
}

template <typename From, typename To>
__global__ void cast_dense(const From* __restrict__ x, To* __restrict__ out, std::int64_t n) {
  constexpr int V = 8;
  const std::int64_t groups = n / V;
  for (std::int64_t g = global_thread(); g < groups; g += grid_threads()) {
    // Two 16-byte float packs and one 16-byte half pack per group of 8.
    if constexpr (std::is_same_v<From, float>) {
      const Pack<float> lo = load_pack(x + g * V), hi = load_pack(x + g * V + 4);
      Pack<To> o;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        o.v[j] = from_compute<To>(lo.v[j]);
        o.v[j + 4] = from_compute<To>(hi.v[j]);
      }
      store_pack(out + g * V, o);
    } else {
      const Pack<From> in = load_pack(x + g * V);
      Pack<float> lo, hi;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        lo.v[j] = to_compute(in.v[j]);
        hi.v[j] = to_compute(in.v[j + 4]);
      }
      store_pack(out + g * V, lo);
      store_pack(out + g * V + 4, hi);
    }
  }
  for (std::int64_t i = groups * V + global_thread(); i < n; i += grid_threads())
    out[i] = convert_value<From, To>(x[i]);
}

// ---- any pair ----
__device__ __forceinline__ std::int64_t load_as_int64(const void* base, DType dtype,
                                                      std::int64_t i) {
  switch (dtype) {
    case DType::int32: return static_cast<const std::int32_t*>(base)[i];
    case DType::int64: return static_cast<const std::int64_t*>(base)[i];
    case DType::uint8: return static_cast<const std::uint8_t*>(base)[i];
    case DType::bool_: return static_cast<const bool*>(base)[i] ? 1 : 0;
    default: return 0;
  }
}

__device__ __forceinline__ void store_from_double(void* base, DType dtype, std::int64_t i,
                                                  double v) {
  switch (dtype) {
    // 16-bit targets round through float, as the CPU backend does (core::store_as).
    case DType::float32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::float16:
      static_cast<__half*>(base)[i] = __float2half_rn(static_cast<float>(v));
      return;
    case DType::bfloat16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(static_cast<float>(v));
      return;
    case DType::float64: static_cast<double*>(base)[i] = v; return;
    case DType::int32:
      static_cast<std::int32_t*>(base)[i] = kernel_math::saturating_cast<std::int32_t>(v);
      return;
    case DType::int64:
      static_cast<std::int64_t*>(base)[i] = kernel_math::saturating_cast<std::int64_t>(v);
      return;
    case DType::uint8:
      static_cast<std::uint8_t*>(base)[i] = kernel_math::saturating_cast<std::uint8_t>(v);
      return;
    case DType::bool_: static_cast<bool*>(base)[i] = v != 0.0; return;  // NaN != 0: true
  }
}

__device__ __forceinline__ void store_from_int64(void* base, DType dtype, std::int64_t i,
                                                 std::int64_t v) {
  switch (dtype) {
    case DType::int32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); return;
    case DType::int64: static_cast<std::int64_t*>(base)[i] = v; return;
    case DType::uint8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(v); return;
    default: return;
  }
}

template <typename Index>
__global__ void cast_strided(DType from, DType to, Strided<1> plan, const void* x, void* out) {
  const Index n = static_cast<Index>(plan.numel);
  // Integer to integer (bool excluded as a target) is exact: int64 beyond 2^53 must not pass
  // through double.
  const bool exact = is_integral_dtype(from) && is_integral_dtype(to) && to != DType::bool_;
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[1];
    offsets_of<Index, 1>(plan, i, off);
    if (exact) {
      store_from_int64(out, to, i, load_as_int64(x, from, off[0]));
    } else {
      store_from_double(out, to, i, load_as_double(x, from, off[0]));
    }
  }
}

template <typename From, typename To>
void launch_dense(const void* x, void* out, std::int64_t n, cudaStream_t s) {
  cast_dense<From, To><<<blocks_for(n / 8 + 1), kThreads, 0, s>>>(static_cast<const From*>(x),
                                                                  static_cast<To*>(out), n);
}

}  // namespace

void cast(DType from, DType to, const Strided<1>& plan, const void* x, void* out, cudaStream_t s) {
  const bool dense = plan.dense && aligned16(x) && aligned16(out);
  if (dense && from == DType::float32 && to == DType::float16) {
    launch_dense<float, __half>(x, out, plan.numel, s);
  } else if (dense && from == DType::float32 && to == DType::bfloat16) {
    launch_dense<float, __nv_bfloat16>(x, out, plan.numel, s);
  } else if (dense && from == DType::float16 && to == DType::float32) {
    launch_dense<__half, float>(x, out, plan.numel, s);
  } else if (dense && from == DType::bfloat16 && to == DType::float32) {
    launch_dense<__nv_bfloat16, float>(x, out, plan.numel, s);
  } else if (plan.index32) {
    cast_strided<std::uint32_t><<<blocks_for(plan.numel), kThreads, 0, s>>>(from, to, plan, x, out);
  } else {
    cast_strided<std::int64_t><<<blocks_for(plan.numel), kThreads, 0, s>>>(from, to, plan, x, out);
  }
  check_launch("cast");
}

}  // namespace mixprec::cuda::kernels
