// CPU kernels of softmax and log_softmax over one axis: fused forward and backward.
// Each (row, tile of columns) is read once from storage into a float buffer (double for float64),
// computed there with the max subtracted, and rounded once into the output dtype.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// x of any strides and a floating dtype; `axis` already normalised to [0, rank).
// Returns a contiguous tensor of x's shape and dtype:
//   softmax:     y = exp(x - max) / sum(exp(x - max))
//   log_softmax: y = (x - max) - log(sum(exp(x - max)))
Tensor softmax_forward(SoftmaxKind kind, const Tensor& x, int axis);

// Gradient with respect to x given the incoming gradient `g` and the forward output `y` (same
// shape and dtype, any strides), computed in float from the stored values and rounded once:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
Tensor softmax_backward(SoftmaxKind kind, const Tensor& g, const Tensor& y, int axis);

}  // namespace mixprec::cpu
