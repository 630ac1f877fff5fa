// CUDA reductions over a set of axes (mirrors cpu/reduce.h), accumulated in float with double
// folding (double for float64).
#pragma once

#include <vector>

#include "backend/cpu/reduce.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// Reduces the axes where reduce_axis[i] is true; the result keeps every axis with extent 1 on the
// reduced ones. Same dtype as x (floating). Sums are multiplied by `scale` before the one rounding.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis,
              double scale = 1.0);

namespace detail {

// How a reduction reads x (contiguous): axes of extent 1 are ignored; when the other reduced axes
// are one contiguous run, x is (outer, length, inner) with the run in the middle and no copy is
// needed: `rows` when inner == 1 (each output a contiguous row), `middle` otherwise (coalesced
// along inner: bias gradients have outer == 1, global average pooling over NHWC is
// (N, H*W, C)). Otherwise (`permuted`) the reduced axes are moved last by a copy, then `rows`.
enum class ReduceLayout { rows, middle, permuted };
struct ReducePlan {
  ReduceLayout layout = ReduceLayout::rows;
  std::int64_t outer = 1, length = 1, inner = 1;
};
ReducePlan plan_reduce(const Shape& shape, const std::vector<bool>& reduce_axis);

}  // namespace detail

}  // namespace mixprec::cuda
