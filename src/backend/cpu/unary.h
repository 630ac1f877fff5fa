// CPU kernels of the elementwise unary ops: forward, and the fused backward dx = g * f'(x).
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

Tensor unary(UnaryOp op, const Tensor& x);
// Gradient of the op at x (with y = op(x), the forward output) for the incoming gradient g;
// computed in float from the stored values and rounded once.
Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y);

}  // namespace mixprec::cpu
