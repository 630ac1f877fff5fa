// The plain matmul that is the test oracle (DESIGN §7.1): three loops, float64 accumulation,
// element access through strides. Kept simple on purpose; never used on a hot path.
#pragma once

#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// The semantics of mixprec::matmul: op(a) (..., M, K) x op(b) (..., K, N) -> (..., M, N) with
// NumPy broadcasting of the batch axes (a rank-2 operand broadcasts against a batched one), where
// op transposes the last two axes when asked. Operands may have any dtype and any strides; every
// product is accumulated in float64 and the sum rounded to a's dtype (16-bit dtypes through
// float32, as core::store_as does). For an exact oracle pass float64 operands. Not differentiable.
// Throws ShapeError for ranks < 2, mismatched inner extents or batch axes that do not broadcast.
Tensor matmul_reference(const Tensor& a, const Tensor& b, Transpose ta = Transpose::no,
                        Transpose tb = Transpose::no);

}  // namespace mixprec::cpu
