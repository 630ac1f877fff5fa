// Elementwise unary (forward and fused backward) and broadcasting binary kernels, each templated on
// the storage type and computing in float (double for float64) with the per-element bodies the
// CPU backend uses too (src/backend/kernel_math/elementwise_math.h). The op is a runtime argument,
// uniform across the grid, so one kernel per storage type serves every op and compile time stays
// modest.
//
// Two kernels per family and type: a dense one (every operand contiguous, no broadcasting, 16-byte
// aligned) that moves 16 bytes per load and store, and a strided one for everything else
// (broadcasting, views), with 32-bit index arithmetic whenever the offsets fit. A binary op whose
// plan is a per-channel broadcast takes a third, vectorised kernel (binary_channel_kernels.cuh).
#include <optional>

#include "backend/cuda/kernels/common.cuh"
#include "backend/kernel_math/elementwise_math.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/binary_channel_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using kernel_math::binary_value;
using kernel_math::unary_value;

// g * op'(x); a 16-bit y is recomputed in float from x, as on the CPU (kernel_math).
template <typename T>
__device__ __forceinline__ compute_t<T> backward_value(UnaryOp op, compute_t<T> g, compute_t<T> x,
                                                       compute_t<T> y) {
  constexpr bool kHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
  return kernel_math::unary_backward_value(
      op, g, x, y, kHalf ? kernel_math::RecomputeForward::yes : kernel_math::RecomputeForward::no);
}

// ---- unary ----
template <typename T>
__global__ void unary_dense(UnaryOp op, const T* __restrict__ x, T* __restrict__ out,
                            std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    Pack<T> v = load_pack(x + p * V);
#pragma unroll
    for (int j = 0; j < V; ++j) v.v[j] = from_compute<T>(unary_value(op, to_compute(v.v[j])));
    store_pack(out + p * V, v);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_compute<T>(unary_value(op, to_compute(x[i])));
}

template <typename T, typename Index>
__global__ void unary_strided(UnaryOp op, Strided<1> plan, const T* __restrict__ x,
                              T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[1];
    offsets_of<Index, 1>(plan, i, off);
    out[i] = from_compute<T>(unary_value(op, to_compute(x[off[0]])));
  }
}

// ---- unary backward ----
template <typename T>
__global__ void unary_backward_dense(UnaryOp op, const T* __restrict__ g, const T* __restrict__ x,
                                     const T* __restrict__ y, T* __restrict__ out, std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    const Pack<T> gv = load_pack(g + p * V), xv = load_pack(x + p * V), yv = load_pack(y + p * V);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      o.v[j] = from_compute<T>(
          backward_value<T>(op, to_compute(gv.v[j]), to_compute(xv.v[j]), to_compute(yv.v[j])));
    }
    store_pack(out + p * V, o);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads()) {
    out[i] = from_compute<T>(
        backward_value<T>(op, to_compute(g[i]), to_compute(x[i]), to_compute(y[i])));
  }
}

template <typename T, typename Index>
__global__ void unary_backward_strided(UnaryOp op, Strided<3> plan, const T* __restrict__ g,
                                       const T* __restrict__ x, const T* __restrict__ y,
                                       T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[3];
    offsets_of<Index, 3>(plan, i, off);
    out[i] = from_compute<T>(
        backward_value<T>(op, to_compute(g[off[0]]), to_compute(x[off[1]]), to_compute(y[off[2]])));
  }
}

// ---- binary ----
template <typename T>
__global__ void binary_dense(BinaryOp op, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out, std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    const Pack<T> av = load_pack(a + p * V), bv = load_pack(b + p * V);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j)
      o.v[j] = from_compute<T>(binary_value(op, to_compute(av.v[j]), to_compute(bv.v[j])));
    store_pack(out + p * V, o);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_compute<T>(binary_value(op, to_compute(a[i]), to_compute(b[i])));
}

// relu(a + b): the sum in the compute type, the relu, one rounding (kernel_math's relu, as the
// unary kernels apply it).
template <typename T, bool Vector>
__global__ void add_relu_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                T* __restrict__ out, std::int64_t n) {
  constexpr int V = Vector ? Pack<T>::kSize : 1;
  const auto one = [](T x, T y) {
    return from_compute<T>(unary_value(UnaryOp::relu, to_compute(x) + to_compute(y)));
  };
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    if constexpr (Vector) {
      const Pack<T> av = load_pack(a + p * V), bv = load_pack(b + p * V);
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = one(av.v[j], bv.v[j]);
      store_pack(out + p * V, o);
    } else {
      out[p] = one(a[p], b[p]);
    }
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads())
    out[i] = one(a[i], b[i]);
}

template <typename T, typename Index>
__global__ void binary_strided(BinaryOp op, Strided<2> plan, const T* __restrict__ a,
                               const T* __restrict__ b, T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[2];
    offsets_of<Index, 2>(plan, i, off);
    out[i] = from_compute<T>(binary_value(op, to_compute(a[off[0]]), to_compute(b[off[1]])));
  }
}

}  // namespace

void unary(UnaryOp op, DType dtype, const Strided<1>& plan, const void* x, void* out,
           cudaStream_t s) {
  dispatch_floating(dtype, "unary op", [&]<typename T>() {
    const T* xp = static_cast<const T*>(x);
    T* op_out = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.dense && aligned16(x) && aligned16(out)) {
      unary_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, xp, op_out, plan.numel);
    } else if (plan.index32) {
      unary_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, xp, op_out);
    } else {
      unary_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, xp, op_out);
    }
  });
  check_launch("unary");
}

void unary_backward(UnaryOp op, DType dtype, const Strided<3>& plan, const void* g, const void* x,
                    const void* y, void* out, cudaStream_t s) {
  dispatch_floating(dtype, "unary op backward", [&]<typename T>() {
    const T* gp = static_cast<const T*>(g);
    const T* xp = static_cast<const T*>(x);
    const T* yp = static_cast<const T*>(y);
    T* o = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.dense && aligned16(g) && aligned16(x) && aligned16(y) && aligned16(out)) {
      unary_backward_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, gp, xp, yp, o, plan.numel);
    } else if (plan.index32) {
      unary_backward_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, gp, xp, yp, o);
    } else {
      unary_backward_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, gp, xp, yp, o);
    }
  });
  check_launch("unary_backward");
}

std::optional<ChannelPlan> channel_plan(const Strided<2>& plan) {
  if (!plan.index32 || plan.dense || (plan.ndim != 2 && plan.ndim != 3)) return std::nullopt;
  const std::int64_t* n = plan.sizes;
  for (int full = 0; full < 2; ++full) {
    const std::int64_t* f = plan.strides[full];
    const std::int64_t* sm = plan.strides[1 - full];
    if (plan.ndim == 3 && f[0] == n[1] * n[2] && f[1] == n[2] && f[2] == 1 && sm[0] == n[2] &&
        sm[1] == 0 && sm[2] == 1) {
      return ChannelPlan{full, n[1] * n[2], n[2]};
    }
    if (plan.ndim == 2 && f[0] == n[1] && f[1] == 1 && sm[0] == 0 && sm[1] == 1) {
      return ChannelPlan{full, plan.numel, n[1]};
    }
  }
  return std::nullopt;
}

void binary(BinaryOp op, DType dtype, const Strided<2>& plan, const void* a, const void* b,
            void* out, cudaStream_t s) {
  dispatch_floating(dtype, "binary op", [&]<typename T>() {
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* o = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    const auto channel = channel_plan(plan);
    constexpr int kVector = Pack<T>::kSize;
    if (channel && channel->channels % kVector == 0 && aligned16(channel->full == 0 ? a : b) &&
        aligned16(out)) {
      binary_channel_kernels::binary_channel_kernel<T, kVector>
          <<<blocks_for(plan.numel / kVector), kThreads, 0, s>>>(
              op, static_cast<std::uint32_t>(plan.numel),
              static_cast<std::uint32_t>(channel->group_size),
              static_cast<std::uint32_t>(channel->channels), channel->full == 0 ? ap : bp,
              channel->full == 0 ? bp : ap, channel->full == 1, o);
    } else if (plan.dense && aligned16(a) && aligned16(b) && aligned16(out)) {
      binary_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, ap, bp, o, plan.numel);
    } else if (plan.index32) {
      binary_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, ap, bp, o);
    } else {
      binary_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, ap, bp, o);
    }
  });
  check_launch("binary");
}

void add_relu_dense(DType dtype, const void* a, const void* b, void* out, std::int64_t n,
                    cudaStream_t s) {
  dispatch_floating(dtype, "add_relu", [&]<typename T>() {
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* o = static_cast<T*>(out);
    if (aligned16(a) && aligned16(b) && aligned16(out)) {
      add_relu_kernel<T, true>
          <<<blocks_for(n / Pack<T>::kSize + 1), kThreads, 0, s>>>(ap, bp, o, n);
    } else {
      add_relu_kernel<T, false><<<blocks_for(n), kThreads, 0, s>>>(ap, bp, o, n);
    }
  });
  check_launch("add_relu");
}

}  // namespace mixprec::cuda::kernels
