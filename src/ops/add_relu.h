// relu(a + b) as one op: the Add + ReLU that ends every residual block (ResNet), one pass over
// memory where the backend has the fused kernel (TensorKernels::add_relu) and one autograd node.
// Bit for bit relu(add(a, b)) forward and backward: relu commutes with the rounding of the sum,
// and its derivative, taken from the output, sees the same side of zero as the rounded sum.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::ops {

// a and b: one floating dtype and device, broadcastable shapes (as add). Differentiable in both.
Tensor add_relu(const Tensor& a, const Tensor& b);

}  // namespace mixprec::ops
