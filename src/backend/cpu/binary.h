// CPU kernels of the broadcasting binary ops (forward and the fused gradient helpers).
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// out = a (op) b with broadcasting; a and b have the same floating dtype; out is a new tensor of
// the broadcast shape.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

// relu(a + b) (TensorKernels::add_relu): one pass in the compute type, rounded once, for operands
// of one shape that are contiguous; otherwise binary then unary (the same bits either way).
Tensor add_relu(const Tensor& a, const Tensor& b);

// acc += g in place (autograd's gradient accumulation where acc has no other owner): one floating
// dtype and shape, acc contiguous, g contiguous or a broadcast view (stride 0 along some axes),
// not overlapping; computed in float and rounded once.
void accumulate_into(const Tensor& acc, const Tensor& g);

}  // namespace mixprec::cpu
