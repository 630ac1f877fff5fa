// CPU dtype conversion of a tensor of any strides into a new contiguous tensor.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cpu {

Tensor cast(const Tensor& x, DType dtype);

// Rounds the values of a contiguous float32 tensor to float16 or bfloat16 precision, keeping them
// in float32: in place, or into a new tensor. cast(cast(x, dtype), float32) in one pass.
void round_to_precision_in_place(Tensor& x, DType dtype);
Tensor round_to_precision(const Tensor& x, DType dtype);

}  // namespace mixprec::cpu
