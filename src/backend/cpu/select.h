// CPU kernels for comparisons, where and finiteness checks.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Broadcasting comparison of two tensors of the same dtype; returns bool.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
// cond (bool) ? a : b, broadcasting all three; a and b share a floating dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor is_finite(const Tensor& x);  // bool
bool all_finite(const Tensor& x);

}  // namespace mixprec::cpu
