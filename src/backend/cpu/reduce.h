// CPU reductions over a set of axes, accumulated in float32 (float64 for float64 input).
#pragma once

#include <vector>

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Reduces the axes where reduce_axis[i] is true; the result keeps every axis with extent 1 on the
// reduced ones (callers reshape for keepdims = no). Same dtype as x. Sums are multiplied by `scale`
// in the accumulation type before the one rounding to x's dtype (mean: scale = 1/count, so that a
// float16 mean of many values does not overflow through its sum).
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis,
              double scale = 1.0);

}  // namespace mixprec::cpu
