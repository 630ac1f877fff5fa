// CUDA kernels of the broadcasting binary ops (mirrors cpu/binary.h).
#pragma once

#include "backend/cpu/binary.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// out = a (op) b with broadcasting; a and b have the same floating dtype and CUDA device; out is a
// new contiguous tensor of the broadcast shape.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

// relu(a + b) (TensorKernels::add_relu): one kernel for operands of one shape, contiguous and
// 16-byte aligned (a residual block's two branches); otherwise binary then unary.
Tensor add_relu(const Tensor& a, const Tensor& b);

}  // namespace mixprec::cuda
