// Fused attention launchers (see cuda/attention.h; the kernels are in attention_kernels.cuh), and
// the device side of the names those kernels share with the host block emulation
// (tests/support/cuda_block_emulation.h): block_sync, warp_sync, shared_memory, exp, log, wmma.
#include <mma.h>

#include <string>

#include "backend/cuda/attention.h"
#include "backend/cuda/kernels/common.cuh"
#include "mixprec/error.h"

namespace mixprec::cuda::kernels {

namespace wmma = nvcuda::wmma;

__device__ __forceinline__ void block_sync() { __syncthreads(); }
__device__ __forceinline__ void warp_sync() { __syncwarp(); }

// The block's dynamic shared memory (the launch's third parameter), 128-byte aligned.
__device__ __forceinline__ unsigned char* shared_memory() {
  extern __shared__ __align__(128) unsigned char attention_shared[];
  return attention_shared;
}

// Single precision where the argument is float (an unqualified exp(float) could otherwise take
// the double overload); IEEE versions, not the fast intrinsics: the results are compared with the
// CPU's.
__device__ __forceinline__ float exp(float x) { return expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }

}  // namespace mixprec::cuda::kernels

// After the names above, which its kernels use.
#include "backend/cuda/kernels/attention_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace attention_kernels;

template <typename T>
constexpr bool kSixteenBit = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// A grid of `blocks` blocks (none: nothing to launch).
unsigned grid_of(std::int64_t blocks, const char* what) {
  if (blocks > 0x7fffffff) {
    throw ValueError(std::string("scaled_dot_product_attention: ") + what +
                     " needs more than 2^31 - 1 blocks on CUDA; split the batch");
  }
  return static_cast<unsigned>(blocks);
}

// Allows a kernel more than the default 48 KiB of dynamic shared memory (the tensor-core kernels
// take up to about 145 KiB at head dims of 128; sm_80 offers 163 KiB a block).
template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes, const char* what) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) != cudaSuccess) {
    check_launch(what);
  }
}

// The kernels index within a tile in 32 bits (64-bit division is a slow subroutine on the GPU).
void check_dims(const AttentionProblem& p) {
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
  if (p.head_dim >= kMaxDim || p.value_dim >= kMaxDim) {
    throw ValueError(
        "scaled_dot_product_attention: head dims of 2^24 or more are not supported on "
        "CUDA (got " +
        std::to_string(p.head_dim) + " and " + std::to_string(p.value_dim) + ")");
  }
}

}  // namespace

bool flash_attention_uses_tensor_cores(DType dtype, std::int64_t head_dim, std::int64_t value_dim) {
  return (dtype == DType::float16 || dtype == DType::bfloat16) &&
         tensor_core_dims(head_dim, value_dim);
}

void flash_attention_forward(DType dtype, const AttentionProblem& p, const void* q, const void* k,
                             const void* v, void* out, void* lse, void* accumulator,
                             cudaStream_t s) {
  check_dims(p);
  const bool tc = flash_attention_uses_tensor_cores(dtype, p.head_dim, p.value_dim);
  dispatch_floating(dtype, "scaled_dot_product_attention", [&]<typename T>() {
    using C = compute_t<T>;
    const T* qp = static_cast<const T*>(q);
    const T* kp = static_cast<const T*>(k);
    const T* vp = static_cast<const T*>(v);
    if constexpr (kSixteenBit<T>) {
      if (tc) {
        const unsigned blocks = grid_of(query_blocks(p, kTcRows), "the forward");
        if (blocks == 0) return;
        const std::size_t bytes = ForwardLayout(p.head_dim, p.value_dim).bytes;
        allow_shared(forward_tc_kernel<T>, bytes, "attention forward (tensor cores)");
        forward_tc_kernel<T><<<blocks, kTcThreads, bytes, s>>>(p, qp, kp, vp, static_cast<T*>(out),
                                                               static_cast<float*>(lse));
        check_launch("attention forward (tensor cores)");
        return;
      }
    }
    const unsigned blocks = grid_of(query_blocks(p, kScalarQ), "the forward");
    if (blocks == 0) return;
    forward_scalar_kernel<T><<<blocks, kScalarThreads, scalar_shared_bytes<C>(), s>>>(
        p, qp, kp, vp, static_cast<T*>(out), static_cast<C*>(lse), static_cast<C*>(accumulator));
    check_launch("attention forward");
  });
}

void flash_attention_backward(DType dtype, const AttentionProblem& p, const void* dout,
                              const void* q, const void* k, const void* v, const void* out,
                              const void* lse, void* row_dots, void* dq_acc, void* dk_acc,
                              void* dv_acc, void* dq, void* dk, void* dv, cudaStream_t s) {
  check_dims(p);
  const bool tc = flash_attention_uses_tensor_cores(dtype, p.head_dim, p.value_dim);
  dispatch_floating(dtype, "scaled_dot_product_attention", [&]<typename T>() {
    using C = compute_t<T>;
    const T* dop = static_cast<const T*>(dout);
    const T* qp = static_cast<const T*>(q);
    const T* kp = static_cast<const T*>(k);
    const T* vp = static_cast<const T*>(v);
    const C* lp = static_cast<const C*>(lse);
    C* dr = static_cast<C*>(row_dots);
    const std::int64_t rows = p.batch * p.heads * p.q_len;
    if (rows > 0) {
      row_dots_kernel<T>
          <<<grid_of(ceil_div(rows, kRowThreads), "the backward"), kRowThreads, 0, s>>>(
              p, dop, static_cast<const T*>(out), dr);
      check_launch("attention backward row dots");
    }
    const unsigned kblocks_tc = grid_of(key_blocks(p, kTcRows), "the backward");
    const unsigned qblocks_tc = grid_of(query_blocks(p, kTcRows), "the backward");
    if constexpr (kSixteenBit<T>) {
      if (tc) {
        if (kblocks_tc > 0) {
          const std::size_t bytes = DkvLayout(p.head_dim, p.value_dim).bytes;
          allow_shared(dkdv_tc_kernel<T>, bytes, "attention backward dK dV (tensor cores)");
          dkdv_tc_kernel<T><<<kblocks_tc, kTcThreads, bytes, s>>>(
              p, dop, qp, kp, vp, lp, dr, static_cast<T*>(dk), static_cast<T*>(dv));
          check_launch("attention backward dK dV (tensor cores)");
        }
        if (qblocks_tc > 0) {
          const std::size_t bytes = DqLayout(p.head_dim, p.value_dim).bytes;
          allow_shared(dq_tc_kernel<T>, bytes, "attention backward dQ (tensor cores)");
          dq_tc_kernel<T><<<qblocks_tc, kTcThreads, bytes, s>>>(p, dop, qp, kp, vp, lp, dr,
                                                                static_cast<T*>(dq));
          check_launch("attention backward dQ (tensor cores)");
        }
        return;
      }
    }
    const unsigned kblocks = grid_of(key_blocks(p, kScalarK), "the backward");
    const unsigned qblocks = grid_of(query_blocks(p, kScalarQ), "the backward");
    if (kblocks > 0) {
      dkdv_scalar_kernel<T><<<kblocks, kScalarThreads, scalar_shared_bytes<C>(), s>>>(
          p, dop, qp, kp, vp, lp, dr, static_cast<C*>(dk_acc), static_cast<C*>(dv_acc),
          static_cast<T*>(dk), static_cast<T*>(dv));
      check_launch("attention backward dK dV");
    }
    if (qblocks > 0) {
      dq_scalar_kernel<T><<<qblocks, kScalarThreads, scalar_shared_bytes<C>(), s>>>(
          p, dop, qp, kp, vp, lp, dr, static_cast<C*>(dq_acc), static_cast<T*>(dq));
      check_launch("attention backward dQ");
    }
  });
}

}  // namespace mixprec::cuda::kernels
