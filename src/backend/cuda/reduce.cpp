#include "backend/cuda/reduce.h"

#include <limits>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernels/launch.h"
#include "core/reduce_split.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis, double scale) {
  const core::ReduceSplit split = core::split_reduce_axes(x.shape(), reduce_axis);
  const std::vector<int>& kept = split.kept;
  const std::vector<int>& reduced = split.reduced;
  const std::int64_t kept_n = split.kept_n, reduced_n = split.reduced_n;
  Tensor out = core::make_tensor(Shape(split.out_dims), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const kernels::Reduce kop = op == ReduceOp::sum ? kernels::Reduce::sum : kernels::Reduce::max;
  if (reduced_n == 0) {
    fill(out, op == ReduceOp::sum ? 0.0 : -std::numeric_limits<double>::infinity());
    return out;
  }
  // Reduced axes leading (in order) -> (reduced_n, kept_n) column sums, read row by row (bias
  // gradients); otherwise the reduced axes are moved last and copied -> (kept_n, reduced_n) rows.
  bool leading = kept_n > 1;
  for (std::size_t i = 0; i < reduced.size(); ++i)
    leading = leading && reduced[i] == static_cast<int>(i);
  Tensor src = x.detach();
  if (!leading) {
    std::vector<int> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    src = src.permute(order);
  }
  src = contiguous(src);
  const std::int64_t partials = leading ? kernels::reduce_columns_partials(reduced_n, kept_n)
                                        : kernels::reduce_rows_partials(kept_n, reduced_n);
  // Scratch for the per-block partial results (double); freed stream-ordered after the launch.
  Tensor scratch;
  if (partials > 0) scratch = core::make_tensor(Shape{partials}, DType::float64, x.device());
  double* partial_ptr = partials > 0 ? static_cast<double*>(scratch.data_ptr()) : nullptr;
  StreamScope scope(x.device());
  if (leading) {
    kernels::reduce_columns(kop, x.dtype(), src.data_ptr(), reduced_n, kept_n, scale, partial_ptr,
                            out.data_ptr(), scope.stream());
  } else {
    kernels::reduce_rows(kop, x.dtype(), src.data_ptr(), kept_n, reduced_n, scale, partial_ptr,
                         out.data_ptr(), scope.stream());
  }
  return out;
}

}  // namespace mixprec::cuda
