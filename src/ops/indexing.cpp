// argmax and one_hot: integer-valued results, not differentiable (no graph is recorded).
// The checks are here and the same on every device; the kernels are the backend's
// (TensorKernels::argmax, ::one_hot). The index range is checked by the CPU kernel (it reads every
// index before anything is written and throws), while a GPU writes a NaN row for an out-of-range
// index instead, since reading the indices back would cost a host sync per training step (ops.h).
#include <limits>
#include <string>

#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

bool is_integer_index_dtype(DType dtype) {
  return dtype == DType::int32 || dtype == DType::int64 || dtype == DType::uint8;
}

}  // namespace

Tensor argmax(const Tensor& x, int axis, KeepDims keep) {
  ops::check_defined("argmax", x);
  const int a = normalize_axis(axis, x.rank(), "argmax");
  if (x.shape()[a] == 0) {
    throw ShapeError("argmax: cannot take the argmax over the empty axis " + std::to_string(axis) +
                     " of shape " + x.shape().to_string());
  }
  std::vector<std::int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != a)
      dims.push_back(x.shape()[i]);
    else if (keep == KeepDims::yes)
      dims.push_back(1);
  }
  Tensor out = core::make_tensor(Shape(dims), DType::int64, x.device());
  if (out.numel() == 0) return out;
  backend_for(x.device()).tensor->argmax(x, a, out);
  return out;
}

Tensor one_hot(const Tensor& indices, std::int64_t depth, DType dtype) {
  ops::check_defined("one_hot", indices);
  if (!is_integer_index_dtype(indices.dtype())) {
    throw DTypeError("one_hot: indices must have an integer dtype (int32, int64 or uint8), got " +
                     ops::describe(indices) + "; cast them with .to(mixprec::kInt64)");
  }
  if (depth < 0)
    throw ValueError("one_hot: depth must be non-negative, got " + std::to_string(depth));
  const std::int64_t count = indices.numel();
  if (depth > 0 && count > std::numeric_limits<std::int64_t>::max() / depth) {
    throw ValueError("one_hot: " + std::to_string(count) + " indices times depth " +
                     std::to_string(depth) + " elements overflow");
  }
  std::vector<std::int64_t> dims(indices.shape().begin(), indices.shape().end());
  dims.push_back(depth);
  const Shape out_shape(dims);
  // Depth 0 leaves no valid index: known without reading any, so refused on every device.
  if (depth == 0 && count > 0) {
    throw ValueError("one_hot: depth 0 leaves no valid index for the " + std::to_string(count) +
                     " indices of shape " + indices.shape().to_string() +
                     "; depth must be the number of classes");
  }
  Tensor out = core::make_tensor(out_shape, dtype, indices.device());
  backend_for(indices.device()).tensor->one_hot(indices, depth, out);
  return out;
}

}  // namespace mixprec
