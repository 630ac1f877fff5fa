// CUDA kernels of softmax and log_softmax over one axis (mirrors cpu/softmax.h).
#pragma once

#include "backend/cpu/softmax.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// x of any strides and a floating dtype; `axis` normalised. Returns a contiguous tensor of x's
// shape and dtype (formulas in cpu/softmax.h).
Tensor softmax_forward(SoftmaxKind kind, const Tensor& x, int axis);
Tensor softmax_backward(SoftmaxKind kind, const Tensor& g, const Tensor& y, int axis);

}  // namespace mixprec::cuda
