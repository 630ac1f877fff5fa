// CUDA argmax (the CPU loop lives in ops/indexing.cpp).
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::cuda {

// The index (int64) of the first maximum of x along `axis` (normalised; extent > 0), with the
// first NaN the maximum; result shape: x's without `axis`, written into `out` (contiguous, int64,
// x.numel() / x.shape()[axis] elements, on x's device).
void argmax(const Tensor& x, int axis, const Tensor& out);

}  // namespace mixprec::cuda
