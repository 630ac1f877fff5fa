// CUDA reductions over a set of axes (mirrors cpu/reduce.h), accumulated in float with double
// folding (double for float64).
#pragma once

#include <vector>

#include "backend/cpu/reduce.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

using ReduceOp = cpu::ReduceOp;

// Reduces the axes where reduce_axis[i] is true; the result keeps every axis with extent 1 on the
// reduced ones. Same dtype as x (floating). Sums are multiplied by `scale` before the one rounding.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis,
              double scale = 1.0);

}  // namespace mixprec::cuda
