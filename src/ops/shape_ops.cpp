// View ops: reshape, transpose, permute, slice. They share storage with their input where the
// layout allows; backward maps the gradient back to the input's geometry.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

Shape infer_shape(const Tensor& x, const Shape& requested) {
  std::int64_t known = 1;
  int inferred = -1;
  std::vector<std::int64_t> dims(requested.begin(), requested.end());
  for (int i = 0; i < requested.rank(); ++i) {
    if (dims[static_cast<std::size_t>(i)] == -1) {
      if (inferred >= 0)
        throw ShapeError("reshape: only one extent may be -1, got " + requested.to_string());
      inferred = i;
    } else if (dims[static_cast<std::size_t>(i)] < 0) {
      throw ShapeError("reshape: negative extent in " + requested.to_string());
    } else {
      known *= dims[static_cast<std::size_t>(i)];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      throw ShapeError("reshape: cannot reshape " + x.shape().to_string() + " (" +
                       std::to_string(x.numel()) + " elements) into " + requested.to_string());
    }
    dims[static_cast<std::size_t>(inferred)] = x.numel() / known;
  }
  Shape shape(dims);
  if (shape.numel() != x.numel()) {
    throw ShapeError("reshape: cannot reshape " + x.shape().to_string() + " (" +
                     std::to_string(x.numel()) + " elements) into " + shape.to_string() + " (" +
                     std::to_string(shape.numel()) + " elements)");
  }
  return shape;
}

struct ReshapeBackward final : autograd::Node {
  Shape input_shape;
  std::vector<Tensor> backward(const Tensor& g) override { return {reshape(g, input_shape)}; }
  std::string name() const override { return "ReshapeBackward"; }
};

struct PermuteBackward final : autograd::Node {
  std::vector<int> inverse;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {permute(g, inverse).contiguous()};
  }
  std::string name() const override { return "PermuteBackward"; }
};

struct SliceBackward final : autograd::Node {
  Shape input_shape;
  int axis;
  std::int64_t start, step;
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor grad = zeros(input_shape, {.dtype = g.dtype(), .device = g.device()});
    if (g.numel() == 0) return {grad};
    // Write g into the sliced positions of the zero tensor through a view of it (a strided copy);
    // the window ends just after the last selected index (start + step * n could overflow for a
    // huge step).
    Tensor window = grad.slice(axis, start, start + step * (g.shape()[axis] - 1) + 1, step);
    backend_for(g.device()).tensor->copy(g.detach(), window);
    return {grad};
  }
  std::string name() const override { return "SliceBackward"; }
};

}  // namespace

Tensor reshape(const Tensor& x, const Shape& requested) {
  ops::check_defined("reshape", x);
  const Shape shape = infer_shape(x, requested);
  if (shape == x.shape()) return x;
  // A contiguous input is viewed; anything else is copied first.
  const Tensor src = x.contiguous();
  Tensor out = core::make_view(src, shape, contiguous_strides(shape), src.offset());
  if (!autograd::needs_record({&src})) return out;
  auto node = std::make_shared<ReshapeBackward>();
  node->input_shape = src.shape();
  return autograd::record(out, node, {src});
}

Tensor permute(const Tensor& x, const std::vector<int>& axes) {
  ops::check_defined("permute", x);
  if (static_cast<int>(axes.size()) != x.rank()) {
    throw ShapeError("permute: got " + std::to_string(axes.size()) + " axes for a tensor of rank " +
                     std::to_string(x.rank()) + " " + x.shape().to_string());
  }
  std::vector<int> normalized(axes.size()), inverse(axes.size(), -1);
  std::vector<std::int64_t> dims(axes.size()), strides(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const int a = normalize_axis(axes[i], x.rank(), "permute");
    if (inverse[static_cast<std::size_t>(a)] != -1) {
      throw ShapeError("permute: axis " + std::to_string(axes[i]) + " appears twice");
    }
    inverse[static_cast<std::size_t>(a)] = static_cast<int>(i);
    normalized[i] = a;
    dims[i] = x.shape()[a];
    strides[i] = x.strides()[static_cast<std::size_t>(a)];
  }
  Tensor out = core::make_view(x, Shape(dims), strides, x.offset());
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<PermuteBackward>();
  node->inverse = inverse;
  return autograd::record(out, node, {x});
}

Tensor transpose(const Tensor& x, int axis0, int axis1) {
  ops::check_defined("transpose", x);
  std::vector<int> order(static_cast<std::size_t>(x.rank()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<std::size_t>(normalize_axis(axis0, x.rank(), "transpose"))],
            order[static_cast<std::size_t>(normalize_axis(axis1, x.rank(), "transpose"))]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop, std::int64_t step) {
  ops::check_defined("slice", x);
  const int a = normalize_axis(axis, x.rank(), "slice");
  if (step <= 0) throw ValueError("slice: step must be positive, got " + std::to_string(step));
  const std::int64_t extent = x.shape()[a];
  // Python semantics: negative indices count from the end; out-of-range bounds are clamped.
  auto clamp = [extent](std::int64_t i) {
    return std::clamp<std::int64_t>(i < 0 ? i + extent : i, 0, extent);
  };
  const std::int64_t b = clamp(start), e = std::max(clamp(stop), clamp(start));
  std::vector<std::int64_t> dims(x.shape().begin(), x.shape().end());
  // Written so that no step, however large, overflows.
  dims[static_cast<std::size_t>(a)] = e > b ? (e - b - 1) / step + 1 : 0;
  std::vector<std::int64_t> strides = x.strides();
  const std::int64_t offset = x.offset() + b * strides[static_cast<std::size_t>(a)];
  if (dims[static_cast<std::size_t>(a)] > 1) strides[static_cast<std::size_t>(a)] *= step;
  Tensor out = core::make_view(x, Shape(dims), strides, offset);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<SliceBackward>();
  node->input_shape = x.shape();
  node->axis = a;
  node->start = b;
  node->step = step;
  return autograd::record(out, node, {x});
}

}  // namespace mixprec
