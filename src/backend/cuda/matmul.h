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
// float32 (the result is rounded to bfloat16 once); float64 uses CUBLAS_COMPUTE_64F.
//
// For each (device, shapes, layouts, batch strides, dtypes, compute type, pointer alignments) the
// descriptors and the heuristic's algorithm are created once and cached; the workspace comes from
// the caching allocator.
#pragma once

#include <cstdint>
#include <vector>

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

// ---- layout decisions, exposed for host-side unit tests ----
namespace detail {

// How one (rows, cols) matrix with element strides (sr, sc) is handed to cuBLASLt: as a row-major
// matrix with row stride ld; as the transpose of a row-major (cols, rows) matrix with row stride ld
// (a transposed view); or copied contiguous first (any other layout: gaps in both axes, stride-0
// rows). rows/cols/ld describe the stored row-major matrix.
enum class MatrixKind { row_major, transposed, copy };
struct MatrixLayout {
  MatrixKind kind = MatrixKind::copy;
  std::int64_t rows = 0, cols = 0, ld = 0;
};
MatrixLayout classify_matrix(std::int64_t rows, std::int64_t cols, std::int64_t sr,
                             std::int64_t sc);

// The single element stride that walks an operand's batch axes (extents/strides of its leading
// axes, the same rank as `batch`, extent 1 = broadcast) over `batch` in row-major order: 0 when
// the operand is the same matrix for every batch entry, -1 when no single stride does (then the
// operand is copied out).
std::int64_t single_batch_stride(const std::vector<std::int64_t>& extents,
                                 const std::vector<std::int64_t>& strides, const Shape& batch);

}  // namespace detail

struct MatmulCacheStats {
  std::int64_t entries = 0;  // cached (descriptors, algorithm) plans
  std::int64_t hits = 0;
  std::int64_t misses = 0;  // each one a cuBLASLt heuristic query
};
MatmulCacheStats matmul_cache_stats();

}  // namespace mixprec::cuda
