// CUDA matmul through cuBLASLt (mirrors cpu/matmul.h). Row-major tensors map onto cuBLASLt's
// column-major convention through C^T = op(B)^T op(A)^T: a row-major (R, C) matrix with row stride
// ld is, read column-major, its transpose (C, R) with the same ld, so the product is computed as
// D (N, M) = op(B)^T (N, K) x op(A)^T (K, M) on the unmodified memory, and D read row-major is C.
//
// Accumulation (DESIGN §2.4, seed 004): float32 operands use CUBLAS_COMPUTE_32F (true FP32), or
// CUBLAS_COMPUTE_32F_FAST_TF32 when enable_tensor_float_32_execution(true) / MIXPREC_ALLOW_TF32=1;
// float16 and bfloat16 accumulate in float32 (CUBLAS_COMPUTE_32F); float16 with
// Accumulation::compute_dtype accumulates in float16 (CUBLAS_COMPUTE_16F); bfloat16 has no 16-bit
// accumulation mode in cuBLASLt, so bfloat16 with Accumulation::compute_dtype still accumulates in
// float32 (the result is rounded to bfloat16 once); float64 uses CUBLAS_COMPUTE_64F. A 16-bit
// result of a float32 accumulation is rounded once: the heuristic is kept from split-K algorithms
// that round partial sums, or (with an epilogue) the product before the bias, to 16 bits
// (detail::reduction_scheme_mask, matmul_plan.h).
//
// Every product is three steps, each in its own file:
//   describe (matmul_layout.h): the product's shape and each operand's layout as cuBLASLt reads it
//     (row-major, transposed view, or copied first; one batch stride), from shapes and strides;
//   plan (matmul_plan.h): for each (device, shapes, layouts, batch strides, dtypes, compute type,
//     pointer alignments, epilogue, and the alignments of the epilogue's bias/aux pointers) the
//     descriptors and the heuristic's algorithm, created once and cached (detail::PlanKey);
//   launch (matmul_plan.h): one cublasLtMatmul on the device's compute stream, with the device's
//     persistent workspace (allocated once per device, from the caching allocator, and reused).
// matmul() and matmul_epilogue() below compose the three (matmul.cpp).
#pragma once

#include <cstdint>

#include "backend/cuda/matmul_layout.h"
#include "backend/nn_kernels.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// a: (B..., M, K), or (B..., K, M) with ta = yes; b: (B..., K, N), or (B..., N, K) with tb = yes.
// The same floating dtype on the same CUDA device, the same rank >= 2 (the op layer pads the
// lower-rank operand with leading 1s), inner extents equal and each batch extent equal or 1 (1
// broadcasts); violations throw. Any strides: transposed and leading-dimension-padded views go to
// cuBLASLt as layouts, other layouts are copied first. Returns a new contiguous
// (max(Ba, Bb)..., M, N) tensor of `out_dtype`: the operands' dtype, or float32 for 16-bit operands
// (the float32 accumulator unrounded). Accumulation::compute_dtype requires out_dtype == dtype.
Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
              Accumulation accumulation = Accumulation::float32);

// The same with out_dtype = the operands' dtype.
Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb);

// ---- epilogues: the Dense layer's bias and activation fused into the product ----
//
// The Epilogue vocabulary and EpilogueResult are the backends' (backend/nn_kernels.h).
bool epilogue_adds_bias(Epilogue epilogue);
bool epilogue_keeps_aux(Epilogue epilogue);

// The product with an epilogue. Rank-2 operands only (Dense folds its batch axes into M), the same
// floating dtype on one CUDA device, out_dtype as for matmul (float32 accumulation). `bias`: (N,)
// of out_dtype on the same device, required by the *_bias epilogues and refused by the others.
// Where cuBLASLt has no algorithm for the epilogue (some epilogue, dtype and layout combinations;
// float64), the product runs without it and the elementwise and reduction kernels finish the job:
// the same function with the same one rounding (the product kept in float32, the bias added and
// the activation applied in float32; unfused_epilogue_dtype), counted in
// MatmulCacheStats::epilogue_fallbacks.
EpilogueResult matmul_epilogue(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                               DType out_dtype, Epilogue epilogue, const Tensor& bias = Tensor());

// ---- epilogue decisions, exposed for host-side unit tests (layouts: matmul_layout.h) ----
namespace detail {

// The cublasLtEpilogue_t value of an epilogue.
int cublaslt_epilogue(Epilogue epilogue);

// Leading dimension (elements) of the GELU pre-activation buffer of an output with n columns:
// cuBLASLt wants a multiple of 8 that is at least the rows of its column-major D, our n.
std::int64_t gelu_aux_ld(std::int64_t n);

// The dtype in which the unfused epilogue keeps the product, adds the bias and applies the
// activation before its one rounding to out_dtype: float32 for a 16-bit out_dtype (as the fused
// epilogue, which works on the float32 accumulator), out_dtype otherwise.
DType unfused_epilogue_dtype(DType operand_dtype, DType out_dtype);

// Tests: EpilogueMode::unfused makes matmul_epilogue take its fallback path every time.
enum class EpilogueMode { fused, unfused };
void set_epilogue_mode(EpilogueMode mode);

}  // namespace detail

struct MatmulCacheStats {
  std::int64_t entries = 0;  // cached (descriptors, algorithm) plans
  std::int64_t hits = 0;
  std::int64_t misses = 0;                 // each one a cuBLASLt heuristic query
  std::int64_t epilogue_fallbacks = 0;     // matmul_epilogue calls finished without cuBLASLt's
  std::int64_t workspace_allocations = 0;  // persistent workspaces made: at most one per device
};
MatmulCacheStats matmul_cache_stats();

}  // namespace mixprec::cuda
