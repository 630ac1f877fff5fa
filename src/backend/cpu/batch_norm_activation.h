// CPU batch normalization followed by an elementwise activation (relu, relu6, sigmoid, silu) as
// one kernel: the forward reads x for the statistics and once more to write y = act(bn(x)); the
// backward recomputes the pre-activation bn(x) from x (never stored) in each of its two passes,
// one for the per-channel sums of dz = dy * act'(bn(x)), one for dx. float32, float16 and bfloat16
// storage, read and written directly; statistics and arithmetic in float32.
#pragma once

#include "backend/nn_kernels.h"
#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Whether the fused kernels below handle x of `dtype` with activation `act` (float32, float16,
// bfloat16; relu, relu6, sigmoid, silu).
bool batch_norm_activation_supported(DType dtype, UnaryOp act);

// Preconditions as cpu::batch_norm_training (checked by the op layer) plus
// batch_norm_activation_supported(x.dtype(), act). y = act((x - mean) * inv_std * gamma + beta).
BatchNormTrainingResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon,
                                                       UnaryOp act);

// The same with given statistics (C), float32 or x's dtype.
Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       UnaryOp act);

// dy: the gradient of y (x's shape and dtype); the other arguments as the forward had them. With
// dz = dy * act'(bn(x)), the gradients of cpu::batch_norm_backward for dz.
BatchNormGradients batch_norm_activation_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& mean, const Tensor& variance,
                                                  double epsilon, BatchNormStats stats,
                                                  UnaryOp act);

}  // namespace mixprec::cpu
