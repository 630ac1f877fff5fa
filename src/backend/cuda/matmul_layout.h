// The "describe" step of the CUDA matmul (matmul.h): what a product and its operands look like to
// cuBLASLt, worked out from shapes and strides alone. Pure host logic with no CUDA header, so the
// decisions run in CPU unit tests (tests/unit/cuda_layout_test.cpp, cuda_matmul_plan_test.cpp) and
// the header can be included by code that is built without the CUDA toolkit.
//
// The plan key (PlanKey) lives here for the same reason: it is plain data, the cuBLASLt enum values
// stored as ints; matmul_plan.h builds it from the typed descriptions below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda::detail {

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

// How an operand broadcast over the batch (batch stride 0) reaches cuBLASLt: as a stride-0 batch
// (the first try), or copied out to one matrix per batch entry (the retry for a cuBLASLt that has
// no algorithm for the stride-0 layout).
enum class BatchBroadcast { stride_zero, copy_out };

// What the operand's tensor needs before cuBLASLt can read it: nothing; a contiguous copy of its
// own shape (the matrix layout is neither row-major nor transposed); or a contiguous copy expanded
// to the full batch (no single batch stride, or BatchBroadcast::copy_out of a stride-0 batch).
enum class OperandCopy { none, contiguous, expand_batch };

// One operand as cuBLASLt reads it, after `copy`: a batch of stored row-major (rows, cols) matrices
// with row stride ld, matrix t of the batch at t * batch_stride elements from the data pointer (0:
// the same matrix for every t), `op` applied to the stored matrix.
struct OperandLayout {
  OperandCopy copy = OperandCopy::none;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::int64_t batch_stride = 0;
  Transpose op = Transpose::no;
  bool operator==(const OperandLayout&) const = default;
};

// The layout of operand x (shape/strides (batch'..., R, C), x's batch extents equal to `batch`'s
// or 1) used as op(x) with op = t. Extents are at least 1 (empty products never reach cuBLASLt).
OperandLayout describe_operand(const Shape& shape, const std::vector<std::int64_t>& strides,
                               Transpose t, const Shape& batch, BatchBroadcast broadcast);

// The product C (batch..., M, N) = op(A) (batch..., M, K) x op(B) (batch..., K, N) in row-major
// terms, `batch` the broadcast of the operands' batch extents.
struct ProductShape {
  std::int64_t m = 0, n = 0, k = 0;
  Shape batch;
  bool operator==(const ProductShape&) const = default;
};

// The product shape of a and b (the same rank >= 2) with their transposes. Throws ShapeError
// (naming `who`) when the inner extents differ or a batch extent pair neither matches nor is 1.
ProductShape product_shape(const Shape& a, const Shape& b, Transpose ta, Transpose tb,
                           const char* who);

// What a cached plan is keyed by (cuBLASLt's view of the product): the plan holds descriptors and
// the heuristic's algorithm, which depend on every field, the epilogue and its pointers'
// alignments included. The enum fields hold cuBLASLt's values (cublasOperation_t, cudaDataType_t,
// cublasComputeType_t, cublasLtEpilogue_t) as ints; make_plan_key (matmul_plan.h) fills them.
struct PlanKey {
  int device = 0;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;  // cuBLASLt's: D (m, n) = op(A) (m, k) op(B) (k, n)
  int op_a = 0, op_b = 0;
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int type_ab = 0, type_d = 0, compute = 0, scale = 0;
  std::uint32_t align_a = 0, align_b = 0, align_d = 0;
  int epilogue = 0;  // cublasLtEpilogue_t; 0 or CUBLASLT_EPILOGUE_DEFAULT: none
  std::uint32_t align_bias = 0, align_aux = 0;
  std::int64_t ld_aux = 0;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const;
};

// The largest power of two (up to 256) dividing the address: cuBLASLt picks kernels by alignment.
std::uint32_t alignment_of(const void* p);

}  // namespace mixprec::cuda::detail
