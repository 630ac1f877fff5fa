// The CUDA fused scaled-dot-product attention (NnKernels::attention_forward / _backward, contract
// in backend/nn_kernels.h) with own flash-attention kernels (kernels/attention.cu, bodies in
// kernels/attention_kernels.cuh):
//  - forward: one block per (batch, head, block of queries); an online softmax over blocks of
//    keys keeps only the output and the log-sum-exp of each query;
//  - backward: D_i = sum(dO_i * O_i) per query, then one kernel parallel over blocks of keys (dK,
//    dV: every query block in order, P recomputed from the log-sum-exp) and one parallel over
//    blocks of queries (dQ: every key block in order). Each gradient element is summed by one
//    thread (or one warp's tensor-core tile) in a fixed order: no atomics, the same bits on every
//    run.
// float16 / bfloat16 with head dims that are multiples of 16 up to 128 run the products on tensor
// cores (wmma 16x16x16, float accumulators); everything else (float32, float64, other head dims)
// runs scalar kernels that read q, k and v from global memory. The Tq x Tk scores never leave a
// block's shared memory: memory O(Tq + Tk) per head besides the results.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec {
// backend/nn_kernels.h (declared here so that the kernels' .cu files do not see the ops).
struct AttentionGeometry;
struct AttentionForward;
struct AttentionGradients;
}  // namespace mixprec

namespace mixprec::cuda {

// Preconditions (the op layer checks them): NnKernels::attention_forward / attention_backward.
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& mask, const AttentionGeometry& g);
AttentionGradients attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& out, const Tensor& lse,
                                      const Tensor& mask, const AttentionGeometry& g);

namespace kernels {

// One attention call as the kernels see it (plain data): AttentionGeometry plus the mask's
// pointer and element strides over (batch, heads, q_len, k_len) (0 along broadcast axes; null
// pointer: no mask).
struct AttentionProblem {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;
  bool causal = false;
  bool dropout = false;
  std::uint64_t dropout_base = 0, dropout_threshold = 0;
  // A step captured for CUDA graph replays (core::ReplayParameters): the key is read here, in
  // device memory, where each replay writes its own step's draw; null: dropout_base.
  const std::uint64_t* dropout_base_in_memory = nullptr;
  double keep_scale = 1.0;
  const bool* mask = nullptr;
  std::int64_t mask_strides[4] = {0, 0, 0, 0};
};

#if MIXPREC_HAVE_CUDA
// True when the call runs on tensor cores (float16 / bfloat16, both head dims multiples of 16 in
// [16, 128]); the scalar kernels then need no accumulator scratch.
bool flash_attention_uses_tensor_cores(DType dtype, std::int64_t head_dim, std::int64_t value_dim);

// q (B, Tq, H, D), k (B, Tk, H, D), v (B, Tk, H, Dv) contiguous of `dtype` -> out (B, Tq, H, Dv),
// lse (B, H, Tq) of C (float; double for float64). `accumulator`: B H Tq Dv values of C for the
// scalar kernels, unused (may be null) on tensor cores.
void flash_attention_forward(DType dtype, const AttentionProblem& p, const void* q, const void* k,
                             const void* v, void* out, void* lse, void* accumulator,
                             cudaStream_t s);
// dout, out (B, Tq, H, Dv) -> dq, dk, dv (the shapes of q, k, v). row_dots: B H Tq values of C.
// dq_acc, dk_acc, dv_acc: B H Tq D, B H Tk D and B H Tk Dv values of C for the scalar kernels,
// unused (may be null) on tensor cores.
void flash_attention_backward(DType dtype, const AttentionProblem& p, const void* dout,
                              const void* q, const void* k, const void* v, const void* out,
                              const void* lse, void* row_dots, void* dq_acc, void* dk_acc,
                              void* dv_acc, void* dq, void* dk, void* dv, cudaStream_t s);
#endif  // MIXPREC_HAVE_CUDA

}  // namespace kernels

}  // namespace mixprec::cuda
