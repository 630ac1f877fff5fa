#include "backend/cuda/reduce.h"

#include <limits>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernels/launch.h"
#include "core/reduce_split.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace detail {

ReducePlan plan_reduce(const Shape& shape, const std::vector<bool>& reduce_axis) {
  ReducePlan p;
  int first = -1, last = -1;  // the reduced axes of extent > 1
  bool contiguous_run = true;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1 || !reduce_axis[static_cast<std::size_t>(i)]) continue;
    if (last >= 0) {
      // A kept axis of extent > 1 between two reduced ones breaks the run.
      for (int j = last + 1; j < i; ++j) {
        if (shape[j] != 1) contiguous_run = false;
      }
    }
    if (first < 0) first = i;
    last = i;
  }
  if (!contiguous_run) {
    p.layout = ReduceLayout::permuted;
    return p;
  }
  for (int i = 0; i < shape.rank(); ++i) {
    if (first >= 0 && i >= first && i <= last) {
      p.length *= shape[i];
    } else if (first < 0 || i < first) {
      p.outer *= shape[i];
    } else {
      p.inner *= shape[i];
    }
  }
  if (first < 0) {  // nothing of extent > 1 reduced: every output is one element, a row of 1
    p.outer *= p.inner;
    p.inner = 1;
  }
  if (p.inner == 1) {
    p.layout = ReduceLayout::rows;
  } else if (p.outer <= kernels::kMaxMiddleOuter) {
    p.layout = ReduceLayout::middle;
  } else {
    p.layout = ReduceLayout::permuted;
  }
  return p;
}

}  // namespace detail

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis, double scale) {
  const core::ReduceSplit split = core::split_reduce_axes(x.shape(), reduce_axis);
  const std::vector<int>& kept = split.kept;
  const std::vector<int>& reduced = split.reduced;
  const std::int64_t kept_n = split.kept_n, reduced_n = split.reduced_n;
  Tensor out = core::make_tensor(Shape(split.out_dims), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (reduced_n == 0) {
    fill(out, op == ReduceOp::sum ? 0.0 : -std::numeric_limits<double>::infinity());
    return out;
  }
  const detail::ReducePlan plan = detail::plan_reduce(x.shape(), reduce_axis);
  Tensor src = x.detach();
  if (plan.layout == detail::ReduceLayout::permuted) {
    // The reduced axes moved last and copied -> (kept_n, reduced_n) rows.
    std::vector<int> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    src = src.permute(order);
  }
  src = contiguous(src);
  const bool middle = plan.layout == detail::ReduceLayout::middle;
  // Sums over a middle axis (bias gradients, global average pooling) take the vectorised column
  // sums; maxima the column kernel.
  const bool column_sum = middle && op == ReduceOp::sum;
  const std::int64_t partials =
      column_sum ? kernels::column_sum_partials(x.dtype(), plan.outer, plan.length, plan.inner)
      : middle   ? kernels::reduce_middle_partials(plan.outer, plan.length, plan.inner)
                 : kernels::reduce_rows_partials(kept_n, reduced_n);
  // Scratch for the per-block partial results (double); freed stream-ordered after the launch.
  Tensor scratch;
  if (partials > 0) scratch = core::make_tensor(Shape{partials}, DType::float64, x.device());
  double* partial_ptr = partials > 0 ? static_cast<double*>(scratch.data_ptr()) : nullptr;
  StreamScope scope(x.device());
  if (column_sum) {
    kernels::reduce_middle_sum(x.dtype(), src.data_ptr(), plan.outer, plan.length, plan.inner,
                               scale, partial_ptr, out.data_ptr(), scope.stream());
  } else if (middle) {
    kernels::reduce_middle(op, x.dtype(), src.data_ptr(), plan.outer, plan.length, plan.inner,
                           scale, partial_ptr, out.data_ptr(), scope.stream());
  } else {
    kernels::reduce_rows(op, x.dtype(), src.data_ptr(), kept_n, reduced_n, scale, partial_ptr,
                         out.data_ptr(), scope.stream());
  }
  return out;
}

}  // namespace mixprec::cuda
