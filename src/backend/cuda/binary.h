// CUDA kernels of the broadcasting binary ops (mirrors cpu/binary.h).
#pragma once

#include "backend/cpu/binary.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// out = a (op) b with broadcasting; a and b have the same floating dtype and CUDA device; out is a
// new contiguous tensor of the broadcast shape.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

}  // namespace mixprec::cuda
