// dense_forward: y = activation(x W + b), the Dense layer's op, with autograd.
//   x (..., K) in the compute dtype; kernel W (K, N): the compute dtype, or the float32 master of a
//   mixed-precision layer (read in x's dtype inside the op); bias b (N,) likewise, or undefined.
// Where the backend has no fused matmul epilogue (NnKernels::matmul_epilogue is null: the CPU) it
// is the composition of ops, autocast_matmul(x, W) + b.to(x.dtype()) then the activation, so
// results and gradients are exactly those of the separate ops. Where it has one (CUDA: cuBLASLt)
// the bias (and gelu_tanh) ride on the product as an epilogue; relu and exact gelu run as their
// ops after it (src/ops/dense_op.cpp explains which product carries which epilogue, forward and
// backward).
#pragma once

#include <optional>
#include <string_view>

#include "backend/nn_kernels.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec {

// The activations fused into the op. gelu is the exact erf form (Keras' default), which cuBLASLt's
// GELU epilogue (the tanh approximation) must not replace; gelu_tanh is that approximation.
enum class DenseActivation { linear, relu, gelu, gelu_tanh };

// The DenseActivation of an activation name ("" and "linear", "relu", "gelu"); nullopt for the
// others (sigmoid, softmax, ...), which a layer applies to dense_forward's linear result.
std::optional<DenseActivation> dense_activation_from_name(std::string_view name);

// x (..., K), kernel (K, N), bias (N,) or undefined -> y (..., N) in x's dtype. With
// Accumulation::compute_dtype (16-bit x only) the product rounds its partial sums to x's dtype
// (DESIGN §2.4) and runs as the separate ops on every device. Throws ShapeError, DTypeError or
// DeviceError on mismatched operands.
Tensor dense_forward(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                     DenseActivation activation, Accumulation accumulation = Accumulation::float32);

namespace ops::detail {

// How the fused path computes one Dense call: exposed for host-side unit tests.
enum class GradMode { inference, training };  // whether the op is recorded for a backward pass
enum class BiasMode { none, added };
// What the backward needs besides x and W to form dz = dy * act'(z).
enum class SavedActivation {
  none,            // linear (or an activation applied after the op, which records itself): dz = dy
  pre_activation,  // gelu_tanh: z, the epilogue's aux output
};
// An activation applied by its own op after the fused product (recorded by that op, with its own
// backward): exact gelu, since cuBLASLt's GELU is the tanh approximation; relu, since cuBLASLt's
// RELU epilogue is max(z, 0), which turns a NaN into 0 where the relu op (and the CPU) keep it: a
// NaN hidden in the forward pass is one that neither the user nor the loss-scale check sees.
enum class ActivationAfter { none, relu, exact_gelu };
struct DenseEpiloguePlan {
  bool fused = false;  // false: the composition of separate ops (float64, 16-bit accumulation)
  Epilogue forward = Epilogue::none;  // the forward product's epilogue
  ActivationAfter after = ActivationAfter::none;
  SavedActivation saved = SavedActivation::none;
};
DenseEpiloguePlan plan_dense_epilogue(DenseActivation activation, GradMode grad, DType dtype,
                                      BiasMode bias, Accumulation accumulation);

// Where the backward takes db = sum over rows of dz from.
enum class BiasGradRoute {
  none,           // no bias gradient wanted
  dw_epilogue,    // the dW = x^T dz product's epilogue (cuBLASLt BGRADA): no extra pass over dz
  row_reduction,  // a reduction over dz's rows (no dW product to ride on)
};
enum class KernelGrad { not_needed, needed };
enum class BiasGrad { not_needed, needed };
BiasGradRoute bias_grad_route(KernelGrad kernel, BiasGrad bias);
// The dtype in which the row reduction (a frozen kernel: no dW product to carry BGRADA) sums dz of
// `dz_dtype`: float32 for a 16-bit dz, since the scaled gradient of a large loss scale summed over
// thousands of rows exceeds float16's 65504 before the float32 master bias could take it.
DType row_reduction_dtype(DType dz_dtype);

}  // namespace ops::detail

}  // namespace mixprec
