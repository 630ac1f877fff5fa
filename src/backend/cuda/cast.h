// CUDA dtype conversion (mirrors cpu/cast.h).
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cuda {

// A new contiguous tensor of `dtype` with x's values converted (rules in kernels/launch.h: the
// CPU backend's). x has any strides.
Tensor cast(const Tensor& x, DType dtype);

}  // namespace mixprec::cuda
