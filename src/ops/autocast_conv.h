// Convolutions of a mixed-precision layer in one op: conv2d / depthwise_conv2d (and Conv2D's fused
// relu / relu6, ops/conv_activation.h) of a 16-bit x with the layer's float32 kernel and bias, read
// in x's dtype inside the op. The composition a layer would otherwise record,
//   conv2d(x, cast(kernel, x.dtype()), cast(bias, x.dtype())),
// adds two cast nodes per convolution and two more passes in its backward (each 16-bit gradient
// widened by CastBackward); EfficientNet-B0 has 82 convolutions. Here the casts are kernels inside
// the op, and its node hands the gradients to the kernel and the bias in their own dtype. The
// values are the composition's, bit for bit: the same 16-bit filters and bias in the forward, the
// same 16-bit gradients, widened. Inside a training step (autograd/saved_cast.h: RecastScope) the
// node keeps the float32 kernel and casts it again in its backward instead of keeping the 16-bit
// copy, as it does for a recorded cast.
//
// When x is not 16-bit or the kernel already has x's dtype, these are the plain ops on the
// variables cast with cast() (recorded as usual).
#pragma once

#include <optional>

#include "core/op_kinds.h"
#include "mixprec/nn_ops.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

// kernel (KH, KW, Cin / groups, Cout) and bias (Cout) or undefined, in the variable dtype;
// activation nullopt, relu or relu6 (conv2d_activation's).
Tensor autocast_conv2d(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                       const Conv2dOptions& options, std::optional<UnaryOp> activation);

// kernel (KH, KW, C, M) and bias (C * M) or undefined, in the variable dtype.
Tensor autocast_depthwise_conv2d(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                                 const Conv2dOptions& options);

}  // namespace mixprec::ops
