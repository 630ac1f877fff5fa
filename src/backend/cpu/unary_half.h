// relu and relu6 forward and backward directly on float16/bfloat16 storage: their results are
// exact (an input, 0, 6 or g, g * 0), so they run as integer selects on the 16-bit patterns
// without widening to float and rounding back.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// out = op(x) for relu/relu6 on contiguous 16-bit x; false (out untouched) for other ops/dtypes.
bool unary_half(UnaryOp op, const Tensor& x, Tensor& out);

// out = g * op'(y) for relu/relu6 (the mask from the output, which equals the mask from the
// input) on contiguous 16-bit g and y of one shape; false otherwise.
bool unary_backward_half(UnaryOp op, const Tensor& g, const Tensor& y, Tensor& out);

}  // namespace mixprec::cpu
