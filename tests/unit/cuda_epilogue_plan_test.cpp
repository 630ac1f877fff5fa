// Host-side decisions of the Dense epilogues (no GPU needed): which cuBLASLt epilogue the forward
// product carries for each (activation, gradient mode, dtype, bias), what the backward keeps, where
// the bias gradient comes from, the cuBLASLt enum values, the GELU aux leading dimension, and that
// the plan cache key tells epilogues apart.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/matmul.h"
#include "ops/dense_op.h"

namespace mixprec {
namespace {

using ops::detail::ActivationAfter;
using ops::detail::BiasGrad;
using ops::detail::BiasGradRoute;
using ops::detail::BiasMode;
using ops::detail::DenseEpiloguePlan;
using ops::detail::GradMode;
using ops::detail::KernelGrad;
using ops::detail::plan_dense_epilogue;
using ops::detail::SavedActivation;

DenseEpiloguePlan plan(DenseActivation act, GradMode grad, DType dtype = DType::float16,
                       BiasMode bias = BiasMode::added, Accumulation acc = Accumulation::float32) {
  return plan_dense_epilogue(act, grad, dtype, bias, acc);
}

TEST(CudaEpiloguePlan, InferenceFusesBiasAndActivation) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto lin = plan(DenseActivation::linear, GradMode::inference, dtype);
    EXPECT_TRUE(lin.fused);
    EXPECT_EQ(lin.forward, Epilogue::bias);
    EXPECT_EQ(lin.saved, SavedActivation::none);
    EXPECT_EQ(lin.after, ActivationAfter::none);
    EXPECT_EQ(plan(DenseActivation::relu, GradMode::inference, dtype).forward, Epilogue::bias);
    EXPECT_EQ(plan(DenseActivation::gelu_tanh, GradMode::inference, dtype).forward,
              Epilogue::gelu_tanh_bias);
  }
}

TEST(CudaEpiloguePlan, ExactGeluNeverUsesCublasLtsTanhGelu) {
  for (GradMode grad : {GradMode::inference, GradMode::training}) {
    for (BiasMode bias : {BiasMode::added, BiasMode::none}) {
      const auto p = plan(DenseActivation::gelu, grad, DType::bfloat16, bias);
      EXPECT_TRUE(p.fused);
      EXPECT_EQ(p.forward, bias == BiasMode::added ? Epilogue::bias : Epilogue::none);
      EXPECT_EQ(p.after, ActivationAfter::exact_gelu);
      EXPECT_EQ(p.saved, SavedActivation::none);  // the gelu op records its own backward
    }
  }
  EXPECT_EQ(plan(DenseActivation::gelu_tanh, GradMode::training).after, ActivationAfter::none);
  EXPECT_EQ(plan(DenseActivation::gelu_tanh, GradMode::inference).after, ActivationAfter::none);
}

TEST(CudaEpiloguePlan, ReluNeverUsesCublasLtsReluEpilogue) {
  // cuBLASLt's RELU / RELU_BIAS compute max(z, 0), which turns NaN into 0; relu keeps NaN on the
  // CPU and in the CUDA elementwise kernel, so the relu op runs after a BIAS (or no) epilogue.
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (GradMode grad : {GradMode::inference, GradMode::training}) {
      for (BiasMode bias : {BiasMode::added, BiasMode::none}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) +
                     (grad == GradMode::training ? " training" : " inference") +
                     (bias == BiasMode::added ? " bias" : " no bias"));
        const auto p = plan(DenseActivation::relu, grad, dtype, bias);
        EXPECT_TRUE(p.fused);
        EXPECT_EQ(p.forward, bias == BiasMode::added ? Epilogue::bias : Epilogue::none);
        EXPECT_EQ(p.after, ActivationAfter::relu);
        EXPECT_EQ(p.saved, SavedActivation::none);  // the relu op records its own backward
      }
    }
  }
}

TEST(CudaEpiloguePlan, TrainingKeepsWhatTheBackwardNeeds) {
  const auto gelu = plan(DenseActivation::gelu_tanh, GradMode::training);
  EXPECT_EQ(gelu.forward, Epilogue::gelu_tanh_aux_bias);
  EXPECT_EQ(gelu.saved, SavedActivation::pre_activation);
  EXPECT_EQ(plan(DenseActivation::linear, GradMode::training).saved, SavedActivation::none);
  EXPECT_EQ(plan(DenseActivation::relu, GradMode::inference).saved, SavedActivation::none);
}

TEST(CudaEpiloguePlan, WithoutBias) {
  EXPECT_EQ(
      plan(DenseActivation::linear, GradMode::training, DType::float16, BiasMode::none).forward,
      Epilogue::none);
  EXPECT_EQ(plan(DenseActivation::relu, GradMode::training, DType::float16, BiasMode::none).forward,
            Epilogue::none);
  EXPECT_EQ(
      plan(DenseActivation::gelu_tanh, GradMode::inference, DType::float16, BiasMode::none).forward,
      Epilogue::gelu_tanh);
  EXPECT_EQ(
      plan(DenseActivation::gelu_tanh, GradMode::training, DType::float16, BiasMode::none).forward,
      Epilogue::gelu_tanh_aux);
}

TEST(CudaEpiloguePlan, Float64And16BitAccumulationStayComposed) {
  EXPECT_FALSE(plan(DenseActivation::relu, GradMode::training, DType::float64).fused);
  EXPECT_FALSE(plan(DenseActivation::relu, GradMode::training, DType::float16, BiasMode::added,
                    Accumulation::compute_dtype)
                   .fused);
  EXPECT_FALSE(plan(DenseActivation::linear, GradMode::inference, DType::bfloat16, BiasMode::added,
                    Accumulation::compute_dtype)
                   .fused);
  // float32 has no 16-bit accumulation: compute_dtype is float32 accumulation there.
  EXPECT_TRUE(plan(DenseActivation::relu, GradMode::training, DType::float32, BiasMode::added,
                   Accumulation::compute_dtype)
                  .fused);
}

TEST(CudaEpiloguePlan, BiasGradientRidesOnTheKernelGradient) {
  using ops::detail::bias_grad_route;
  EXPECT_EQ(bias_grad_route(KernelGrad::needed, BiasGrad::needed), BiasGradRoute::dw_epilogue);
  EXPECT_EQ(bias_grad_route(KernelGrad::not_needed, BiasGrad::needed),
            BiasGradRoute::row_reduction);
  EXPECT_EQ(bias_grad_route(KernelGrad::needed, BiasGrad::not_needed), BiasGradRoute::none);
  EXPECT_EQ(bias_grad_route(KernelGrad::not_needed, BiasGrad::not_needed), BiasGradRoute::none);
}

TEST(CudaEpiloguePlan, FrozenKernelBiasGradientSumsInFloat32) {
  // 4096 rows of a float16 dz of 64 (a gradient scaled by 32768) sum to 262144: inf in float16,
  // exact in float32. The row reduction widens 16-bit dz first; float32 and float64 stay.
  using ops::detail::row_reduction_dtype;
  EXPECT_EQ(row_reduction_dtype(DType::float16), DType::float32);
  EXPECT_EQ(row_reduction_dtype(DType::bfloat16), DType::float32);
  EXPECT_EQ(row_reduction_dtype(DType::float32), DType::float32);
  EXPECT_EQ(row_reduction_dtype(DType::float64), DType::float64);
}

TEST(CudaEpiloguePlan, UnfusedFallbackRoundsOnce) {
  // The fallback keeps the product, bias and activation in float32 and rounds once to a 16-bit
  // output, as the fused epilogue and the CPU composition do.
  using cuda::detail::unfused_epilogue_dtype;
  EXPECT_EQ(unfused_epilogue_dtype(DType::float16, DType::float16), DType::float32);
  EXPECT_EQ(unfused_epilogue_dtype(DType::bfloat16, DType::bfloat16), DType::float32);
  EXPECT_EQ(unfused_epilogue_dtype(DType::float16, DType::float32), DType::float32);
  EXPECT_EQ(unfused_epilogue_dtype(DType::float32, DType::float32), DType::float32);
  EXPECT_EQ(unfused_epilogue_dtype(DType::float64, DType::float64), DType::float64);
}

TEST(CudaEpiloguePlan, CublasLtEnumValues) {
  using cuda::detail::cublaslt_epilogue;
  EXPECT_EQ(cublaslt_epilogue(Epilogue::none), CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::bias), CUBLASLT_EPILOGUE_BIAS);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::relu_bias), CUBLASLT_EPILOGUE_RELU_BIAS);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::gelu_tanh_bias), CUBLASLT_EPILOGUE_GELU_BIAS);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::gelu_tanh_aux_bias), CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::relu), CUBLASLT_EPILOGUE_RELU);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::gelu_tanh), CUBLASLT_EPILOGUE_GELU);
  EXPECT_EQ(cublaslt_epilogue(Epilogue::gelu_tanh_aux), CUBLASLT_EPILOGUE_GELU_AUX);
  // Our B (dz in dW = x^T dz) is cuBLASLt's A: its sums over the inner extent are BGRADA.
  EXPECT_EQ(cublaslt_epilogue(Epilogue::bias_grad), CUBLASLT_EPILOGUE_BGRADA);
}

TEST(CudaEpiloguePlan, EpilogueProperties) {
  for (Epilogue e : {Epilogue::bias, Epilogue::relu_bias, Epilogue::gelu_tanh_bias,
                     Epilogue::gelu_tanh_aux_bias}) {
    EXPECT_TRUE(cuda::epilogue_adds_bias(e));
  }
  for (Epilogue e : {Epilogue::none, Epilogue::relu, Epilogue::gelu_tanh, Epilogue::gelu_tanh_aux,
                     Epilogue::bias_grad}) {
    EXPECT_FALSE(cuda::epilogue_adds_bias(e));
  }
  EXPECT_TRUE(cuda::epilogue_keeps_aux(Epilogue::gelu_tanh_aux_bias));
  EXPECT_TRUE(cuda::epilogue_keeps_aux(Epilogue::gelu_tanh_aux));
  EXPECT_FALSE(cuda::epilogue_keeps_aux(Epilogue::gelu_tanh_bias));
  EXPECT_FALSE(cuda::epilogue_keeps_aux(Epilogue::relu_bias));
}

TEST(CudaEpiloguePlan, GeluAuxLeadingDimensionIsAMultipleOf8) {
  using cuda::detail::gelu_aux_ld;
  EXPECT_EQ(gelu_aux_ld(1), 8);
  EXPECT_EQ(gelu_aux_ld(8), 8);
  EXPECT_EQ(gelu_aux_ld(19), 24);
  EXPECT_EQ(gelu_aux_ld(4096), 4096);
  EXPECT_EQ(gelu_aux_ld(4097), 4104);
}

TEST(CudaEpiloguePlan, CacheKeyTellsEpiloguesApart) {
  cuda::detail::PlanKey a;
  a.m = 19, a.n = 33, a.k = 21, a.lda = 19, a.ldb = 21, a.ldd = 19;
  a.type_ab = CUDA_R_16F, a.type_d = CUDA_R_16F;
  a.compute = CUBLAS_COMPUTE_32F, a.scale = CUDA_R_32F;
  a.align_a = a.align_b = a.align_d = 256;
  const cuda::detail::PlanKeyHash hash;
  cuda::detail::PlanKey b = a;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(hash(a), hash(b));
  b.epilogue = cuda::detail::cublaslt_epilogue(Epilogue::relu_bias);
  b.align_bias = 256;
  EXPECT_FALSE(a == b);
  EXPECT_NE(hash(a), hash(b));
  cuda::detail::PlanKey c = b;
  c.epilogue = cuda::detail::cublaslt_epilogue(Epilogue::gelu_tanh_bias);
  EXPECT_FALSE(b == c);
  EXPECT_NE(hash(b), hash(c));
  // The bias pointer's alignment changes which kernels qualify: a different plan.
  cuda::detail::PlanKey d = b;
  d.align_bias = 2;
  EXPECT_FALSE(b == d);
  EXPECT_NE(hash(b), hash(d));
  cuda::detail::PlanKey e = a;
  e.epilogue = cuda::detail::cublaslt_epilogue(Epilogue::gelu_tanh_aux_bias);
  e.ld_aux = 24;
  cuda::detail::PlanKey f = e;
  f.ld_aux = 32;
  EXPECT_FALSE(e == f);
  EXPECT_NE(hash(e), hash(f));
}

}  // namespace
}  // namespace mixprec
