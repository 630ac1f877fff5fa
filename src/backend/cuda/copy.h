// Copies and fills of CUDA tensors (no autograd: callers record what they need).
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cuda {

// dst = src elementwise: the same shape and dtype, both on the same CUDA device, any strides
// (dst's elements must not overlap). Contiguous pairs are one cudaMemcpyAsync.
void copy_strided(const Tensor& src, const Tensor& dst);
// x itself when contiguous, else a new contiguous copy (not recorded by autograd).
Tensor contiguous(const Tensor& x);
// Sets every element of the contiguous CUDA tensor t to `value` converted to t's dtype (as
// core::from_double does on the CPU); 0 is a cudaMemsetAsync.
void fill(const Tensor& t, double value);
// A new CUDA tensor of `shape` filled with `value`.
Tensor full(const Shape& shape, double value, DType dtype, Device device);

}  // namespace mixprec::cuda
