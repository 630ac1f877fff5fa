// CPU fill (TensorKernels::fill): every element of a contiguous tensor set to one value.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// t (contiguous, any dtype) = value converted to t's dtype; 0 writes all-zero bytes.
void fill(const Tensor& t, double value);

}  // namespace mixprec::cpu
