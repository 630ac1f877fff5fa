// CPU dtype conversion of a tensor of any strides into a new contiguous tensor.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cpu {

Tensor cast(const Tensor& x, DType dtype);

}  // namespace mixprec::cpu
