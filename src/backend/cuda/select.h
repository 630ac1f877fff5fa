// CUDA kernels of comparisons, where and finiteness checks (mirrors cpu/select.h).
#pragma once

#include "backend/cpu/select.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// Broadcasting comparison of two tensors of the same dtype (any dtype); returns bool.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
// cond (bool) ? a : b, broadcasting all three; a and b share a floating dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor is_finite(const Tensor& x);  // bool
// Waits for the answer (one int copied back to the host).
bool all_finite(const Tensor& x);

}  // namespace mixprec::cuda
