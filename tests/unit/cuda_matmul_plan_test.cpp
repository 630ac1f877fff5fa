// Host-side steps of the CUDA matmul, checked without a GPU: describe (how each operand reaches
// cuBLASLt: as it is, copied contiguous, or copied out to the full batch; the product's shape) and
// plan (the compute mode of each dtype and accumulation, and the plan key with cuBLASLt's operands
// swapped). Expected values are worked out by hand from the shapes and strides.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/matmul_layout.h"
#include "backend/cuda/matmul_plan.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec::cuda::detail {
namespace {

using Strides = std::vector<std::int64_t>;

OperandLayout describe(const Shape& shape, const Strides& strides, Transpose t, const Shape& batch,
                       BatchBroadcast broadcast = BatchBroadcast::stride_zero) {
  return describe_operand(shape, strides, t, batch, broadcast);
}

const void* address(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(CudaMatmulDescribe, StridedMatricesAreReadInPlace) {
  // Contiguous (3, 5, 6) over batch (3): matrices 30 elements apart.
  OperandLayout l = describe(Shape{3, 5, 6}, {30, 6, 1}, Transpose::no, Shape{3});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::none, 5, 6, 6, 30, Transpose::no}));
  // A padded (5, 6) view with row stride 10, used transposed.
  l = describe(Shape{5, 6}, {10, 1}, Transpose::yes, Shape{});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::none, 5, 6, 10, 0, Transpose::yes}));
  // The transposed view (5, 6) of a contiguous (6, 5): the stored (6, 5) matrix with the
  // transpose flipped, both ways.
  l = describe(Shape{5, 6}, {1, 5}, Transpose::no, Shape{});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::none, 6, 5, 5, 0, Transpose::yes}));
  l = describe(Shape{5, 6}, {1, 5}, Transpose::yes, Shape{});
  EXPECT_EQ(l.op, Transpose::no);
  // A (1, 7) row with any row stride.
  l = describe(Shape{1, 7}, {123, 1}, Transpose::no, Shape{});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::none, 1, 7, 7, 0, Transpose::no}));
}

TEST(CudaMatmulDescribe, OtherMatrixLayoutsAreCopiedContiguous) {
  // Gaps in both axes: a contiguous (4, 3) copy, the transpose kept as asked.
  OperandLayout l = describe(Shape{4, 3}, {20, 2}, Transpose::yes, Shape{});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::contiguous, 4, 3, 3, 0, Transpose::yes}));
  // A batch of such matrices: the copy's own batch stride.
  l = describe(Shape{2, 4, 3}, {100, 20, 2}, Transpose::no, Shape{2});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::contiguous, 4, 3, 3, 12, Transpose::no}));
}

TEST(CudaMatmulDescribe, BroadcastBatchesAreStrideZeroOrCopiedOut) {
  // (1, 5, 6) over batch (3): one matrix for all, or (retry) one copy per batch entry.
  OperandLayout l = describe(Shape{1, 5, 6}, {30, 6, 1}, Transpose::no, Shape{3});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::none, 5, 6, 6, 0, Transpose::no}));
  l = describe(Shape{1, 5, 6}, {30, 6, 1}, Transpose::no, Shape{3}, BatchBroadcast::copy_out);
  EXPECT_EQ(l, (OperandLayout{OperandCopy::expand_batch, 5, 6, 6, 30, Transpose::no}));
  // A batch of one has nothing to copy out.
  l = describe(Shape{1, 5, 6}, {30, 6, 1}, Transpose::no, Shape{1}, BatchBroadcast::copy_out);
  EXPECT_EQ(l.copy, OperandCopy::none);
  EXPECT_EQ(l.batch_stride, 0);
}

TEST(CudaMatmulDescribe, BatchesWithoutOneStrideAreExpanded) {
  // (3, 1, 5, 6) over batch (3, 4): broadcast on the inner batch axis only.
  OperandLayout l = describe(Shape{3, 1, 5, 6}, {30, 30, 6, 1}, Transpose::yes, Shape{3, 4});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::expand_batch, 5, 6, 6, 30, Transpose::yes}));
  // A stride-0 (expanded) batch axis of a matrix that needs a copy: its contiguous copy would have
  // no single batch stride either, so the one copy expands the batch.
  l = describe(Shape{2, 1, 4, 3}, {0, 0, 20, 2}, Transpose::no, Shape{2, 5});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::expand_batch, 4, 3, 3, 12, Transpose::no}));
  // The same matrix expanded along a single batch axis stays one matrix for all in the copy.
  l = describe(Shape{3, 4, 3}, {0, 20, 2}, Transpose::no, Shape{3});
  EXPECT_EQ(l, (OperandLayout{OperandCopy::contiguous, 4, 3, 3, 12, Transpose::no}));
}

TEST(CudaMatmulDescribe, ProductShapeBroadcastsTheBatch) {
  ProductShape p =
      product_shape(Shape{2, 1, 5, 6}, Shape{1, 3, 6, 7}, Transpose::no, Transpose::no, "mm");
  EXPECT_EQ(p, (ProductShape{5, 7, 6, Shape{2, 3}}));
  p = product_shape(Shape{6, 5}, Shape{7, 6}, Transpose::yes, Transpose::yes, "mm");
  EXPECT_EQ(p, (ProductShape{5, 7, 6, Shape{}}));
  EXPECT_EQ(p.batch.numel(), 1);  // a plain product is a batch of one
}

TEST(CudaMatmulDescribe, ProductShapeRefusesWhatDoesNotMultiply) {
  testing::expect_error<ShapeError>(
      [] {
        product_shape(Shape{5, 6}, Shape{5, 7}, Transpose::no, Transpose::no, "cuda::mm");
      },
      {"cuda::mm", "inner dimensions do not match", "(5, 6)", "(5, 7)"});
  testing::expect_error<ShapeError>(
      [] {
        product_shape(Shape{2, 5, 6}, Shape{3, 6, 7}, Transpose::no, Transpose::no, "cuda::mm");
      },
      {"cuda::mm", "batch dimensions do not broadcast"});
  EXPECT_THROW(product_shape(Shape{5, 6}, Shape{1, 6, 7}, Transpose::no, Transpose::no, "mm"),
               ShapeError);
}

TEST(CudaMatmulPlan, ComputeModeFollowsDtypeAndAccumulation) {
  const auto expect_mode = [](DType dtype, Accumulation acc, Tf32 tf32, cublasComputeType_t compute,
                              cudaDataType_t scale) {
    SCOPED_TRACE(dtype_name(dtype));
    const ComputeMode mode = compute_mode(dtype, acc, tf32);
    EXPECT_EQ(mode.compute, compute);
    EXPECT_EQ(mode.scale, scale);
  };
  const Accumulation f32 = Accumulation::float32, narrow = Accumulation::compute_dtype;
  expect_mode(DType::float32, f32, Tf32::off, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  expect_mode(DType::float32, f32, Tf32::allowed, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
  expect_mode(DType::float16, f32, Tf32::allowed, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  expect_mode(DType::float16, narrow, Tf32::off, CUBLAS_COMPUTE_16F, CUDA_R_16F);
  // bfloat16 has no 16-bit accumulation in cuBLASLt: float32 either way.
  expect_mode(DType::bfloat16, narrow, Tf32::off, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  expect_mode(DType::bfloat16, f32, Tf32::allowed, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  expect_mode(DType::float64, f32, Tf32::allowed, CUBLAS_COMPUTE_64F, CUDA_R_64F);
}

TEST(CudaMatmulPlan, DataTypesOfTheFloatingDtypes) {
  EXPECT_EQ(data_type(DType::float32), CUDA_R_32F);
  EXPECT_EQ(data_type(DType::float16), CUDA_R_16F);
  EXPECT_EQ(data_type(DType::bfloat16), CUDA_R_16BF);
  EXPECT_EQ(data_type(DType::float64), CUDA_R_64F);
  testing::expect_error<DTypeError>([] { data_type(DType::int32); },
                                    {"int32", "float32, float16, bfloat16, float64"});
}

TEST(CudaMatmulPlan, AlignmentIsTheLargestPowerOfTwoUpTo256) {
  EXPECT_EQ(alignment_of(address(0x10000)), 256u);
  EXPECT_EQ(alignment_of(address(0x10100)), 256u);
  EXPECT_EQ(alignment_of(address(0x10040)), 64u);
  EXPECT_EQ(alignment_of(address(0x10006)), 2u);
  EXPECT_EQ(alignment_of(address(0x10001)), 1u);
}

TEST(CudaMatmulPlan, KeySwapsTheOperandsIntoCublasLtsTerms) {
  // C (4, 5, 7) = A (4, 5, 6) x op(B) with B a stored (7, 6) matrix broadcast over the batch.
  const ProductShape shape{5, 7, 6, Shape{4}};
  const OperandView a{address(0x10000), {OperandCopy::none, 5, 6, 6, 30, Transpose::no}};
  const OperandView b{address(0x20008), {OperandCopy::none, 7, 6, 16, 0, Transpose::yes}};
  const ProductTypes types{DType::float16, DType::float32, Accumulation::float32};
  const PlanKey key = make_plan_key(1, shape, a, b, address(0x30040), types, Tf32::off, {});
  EXPECT_EQ(key.device, 1);
  // cuBLASLt: D (7, 5) = op(B)^T (7, 6) x A^T (6, 5), D's ld 7, one D every 35 elements.
  EXPECT_EQ(key.m, 7);
  EXPECT_EQ(key.n, 5);
  EXPECT_EQ(key.k, 6);
  EXPECT_EQ(key.batch, 4);
  EXPECT_EQ(key.op_a, CUBLAS_OP_T);
  EXPECT_EQ(key.op_b, CUBLAS_OP_N);
  EXPECT_EQ(key.lda, 16);
  EXPECT_EQ(key.ldb, 6);
  EXPECT_EQ(key.ldd, 7);
  EXPECT_EQ(key.stride_a, 0);
  EXPECT_EQ(key.stride_b, 30);
  EXPECT_EQ(key.stride_d, 35);
  EXPECT_EQ(key.type_ab, CUDA_R_16F);
  EXPECT_EQ(key.type_d, CUDA_R_32F);
  EXPECT_EQ(key.compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(key.scale, CUDA_R_32F);
  EXPECT_EQ(key.align_a, 8u);  // b's pointer
  EXPECT_EQ(key.align_b, 256u);
  EXPECT_EQ(key.align_d, 64u);
  EXPECT_EQ(key.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(key.align_bias, 0u);
  EXPECT_EQ(key.align_aux, 0u);
  // float32 operands with TF32 allowed are another plan.
  const ProductTypes f32{DType::float32, DType::float32, Accumulation::float32};
  EXPECT_FALSE(make_plan_key(0, shape, a, b, address(0x30040), f32, Tf32::off, {}) ==
               make_plan_key(0, shape, a, b, address(0x30040), f32, Tf32::allowed, {}));
}

TEST(CudaMatmulPlan, KeyHoldsTheEpiloguePointersAlignments) {
  const ProductShape shape{5, 7, 6, Shape{}};
  const OperandView a{address(0x10000), {OperandCopy::none, 5, 6, 6, 0, Transpose::no}};
  const OperandView b{address(0x20000), {OperandCopy::none, 6, 7, 7, 0, Transpose::no}};
  const ProductTypes types{DType::bfloat16, DType::bfloat16, Accumulation::float32};
  EpilogueBinding gelu;
  gelu.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  gelu.bias = address(0x40004);
  gelu.aux = const_cast<void*>(address(0x50020));
  gelu.ld_aux = 8;
  PlanKey key = make_plan_key(0, shape, a, b, address(0x30000), types, Tf32::off, gelu);
  EXPECT_EQ(key.epilogue, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  EXPECT_EQ(key.align_bias, 4u);
  EXPECT_EQ(key.align_aux, 32u);
  EXPECT_EQ(key.ld_aux, 8);
  // The bias gradient of BGRADA goes through the same bias pointer.
  EpilogueBinding bgrad;
  bgrad.epilogue = CUBLASLT_EPILOGUE_BGRADA;
  bgrad.bias_grad = const_cast<void*>(address(0x40010));
  EXPECT_EQ(bgrad.bias_pointer(), address(0x40010));
  key = make_plan_key(0, shape, a, b, address(0x30000), types, Tf32::off, bgrad);
  EXPECT_EQ(key.epilogue, CUBLASLT_EPILOGUE_BGRADA);
  EXPECT_EQ(key.align_bias, 16u);
  EXPECT_EQ(key.align_aux, 0u);
}

}  // namespace
}  // namespace mixprec::cuda::detail
