// CUDA kernels of the elementwise unary ops (mirrors cpu/unary.h): forward, and the fused backward
// dx = g * f'(x). Floating dtypes; any strides in, a new contiguous tensor out.
#pragma once

#include "backend/cpu/unary.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

Tensor unary(UnaryOp op, const Tensor& x);
Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y);

}  // namespace mixprec::cuda
