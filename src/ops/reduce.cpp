// Reductions (sum, mean, max) and the broadcast pair sum_to / broadcast_to; the reduction kernels
// are the backend's (TensorKernels::reduce) for the tensor's device.
#include <algorithm>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

// Which axes a reduction covers; empty `axes` means all. Repeated axes are an error.
std::vector<bool> axis_mask(const char* op, const Tensor& x, const std::vector<int>& axes) {
  std::vector<bool> mask(static_cast<std::size_t>(x.rank()), axes.empty());
  for (int axis : axes) {
    const auto a = static_cast<std::size_t>(normalize_axis(axis, x.rank(), op));
    if (mask[a])
      throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " listed twice");
    mask[a] = true;
  }
  return mask;
}

Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<bool>& mask,
                     double scale = 1.0) {
  return backend_for(x.device()).tensor->reduce(op, x, mask, scale);
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, KeepDims keep) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < shape.rank(); ++i) {
    if (!mask[static_cast<std::size_t>(i)])
      dims.push_back(shape[i]);
    else if (keep == KeepDims::yes)
      dims.push_back(1);
  }
  return Shape(dims);
}

struct SumBackward final : autograd::Node {
  Shape input_shape, kept_shape;  // kept_shape: the output with reduced axes as extent 1
  double scale = 1.0;             // 1/count for mean
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor grad = reshape(g, kept_shape);
    if (scale != 1.0) {
      // Scale the (small) reduced gradient before broadcasting it, in float32 for 16-bit dtypes:
      // 1/count itself is not representable in float16 for large counts (1e-6 is a subnormal with
      // 4 significant bits), and rounding it first would bias every gradient.
      grad = is_16bit_float(grad.dtype())
                 ? cast(mul(cast(grad, DType::float32), scale), grad.dtype())
                 : mul(grad, scale);
    }
    // A broadcast view (stride 0 along the reduced axes), not a copy: autograd adds it in place
    // into the gradient of a fan-out (the squeeze-and-excitation input gets the gate's gradient
    // and this one) and makes it dense only for a node that receives it as its own.
    return {broadcast_to(grad, input_shape)};
  }
  std::string name() const override { return scale == 1.0 ? "SumBackward" : "MeanBackward"; }
};

struct MaxBackward final : autograd::Node {
  Tensor x, kept_max;  // kept_max: the max with reduced axes as extent 1
  std::vector<Tensor> backward(const Tensor& g) override {
    // The gradient is shared equally among the elements equal to the max (ties split evenly).
    const Tensor is_max = equal(x, kept_max);
    const Tensor mask = cast(is_max, x.dtype());
    std::vector<int> axes;
    for (int i = 0; i < x.rank(); ++i) {
      if (kept_max.shape()[i] == 1 && x.shape()[i] != 1) axes.push_back(i);
    }
    const Tensor count = axes.empty() ? ones_like(kept_max) : sum(mask, axes, KeepDims::yes);
    return {mul(mask, div(reshape(g, kept_max.shape()), count))};
  }
  std::string name() const override { return "MaxBackward"; }
  void release_saved() override { x = kept_max = Tensor(); }
};

Tensor reduce_op(ReduceOp op, const char* name, const Tensor& x, const std::vector<int>& axes,
                 KeepDims keep, bool is_mean) {
  ops::check_floating(name, x);
  const auto mask = axis_mask(name, x, axes);
  if (op == ReduceOp::max) {
    for (int i = 0; i < x.rank(); ++i) {
      if (mask[static_cast<std::size_t>(i)] && x.shape()[i] == 0) {
        throw ShapeError(std::string(name) + ": cannot reduce the empty axis " + std::to_string(i) +
                         " of shape " + x.shape().to_string());
      }
    }
  }
  std::int64_t count = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (mask[static_cast<std::size_t>(i)]) count *= x.shape()[i];
  }
  // The mean divides in the float32 accumulator, before the one rounding to x's dtype: a float16
  // sum of many values would overflow (or round) before a division done afterwards.
  const double scale = is_mean ? 1.0 / static_cast<double>(std::max<std::int64_t>(count, 1)) : 1.0;
  Tensor kept = reduce_kernel(op, x, mask, scale);
  Tensor out = reshape(kept, reduced_shape(x.shape(), mask, keep)).detach();
  if (!autograd::needs_record({&x})) return out;
  if (op == ReduceOp::sum) {
    auto node = std::make_shared<SumBackward>();
    node->input_shape = x.shape();
    node->kept_shape = kept.shape();
    node->scale = scale;
    return autograd::record(out, node, {x});
  }
  auto node = std::make_shared<MaxBackward>();
  node->x = x.detach();
  node->kept_max = kept.detach();
  return autograd::record(out, node, {x});
}

struct SumToBackward final : autograd::Node {
  Shape input_shape;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {broadcast_to(g, input_shape).contiguous()};
  }
  std::string name() const override { return "SumToBackward"; }
};

struct BroadcastBackward final : autograd::Node {
  Shape input_shape;
  std::vector<Tensor> backward(const Tensor& g) override { return {sum_to(g, input_shape)}; }
  std::string name() const override { return "BroadcastToBackward"; }
};

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, KeepDims keep) {
  return reduce_op(ReduceOp::sum, "sum", x, axes, keep, false);
}
Tensor mean(const Tensor& x, const std::vector<int>& axes, KeepDims keep) {
  return reduce_op(ReduceOp::sum, "mean", x, axes, keep, true);
}
Tensor max(const Tensor& x, const std::vector<int>& axes, KeepDims keep) {
  return reduce_op(ReduceOp::max, "max", x, axes, keep, false);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  ops::check_floating("sum_to", x);
  if (x.shape() == shape) return x;
  if (broadcast_shapes(shape, x.shape(), "sum_to") != x.shape()) {
    throw ShapeError("sum_to: shape " + shape.to_string() + " does not broadcast to " +
                     x.shape().to_string());
  }
  // Reduce the leading axes x has beyond `shape` and the axes where `shape` has extent 1.
  const int lead = x.rank() - shape.rank();
  std::vector<bool> mask(static_cast<std::size_t>(x.rank()), false);
  for (int i = 0; i < x.rank(); ++i) {
    mask[static_cast<std::size_t>(i)] = i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1);
  }
  Tensor out = reshape(reduce_kernel(ReduceOp::sum, x, mask), shape).detach();
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<SumToBackward>();
  node->input_shape = x.shape();
  return autograd::record(out, node, {x});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  ops::check_defined("broadcast_to", x);
  if (x.shape() == shape) return x;
  if (broadcast_shapes(x.shape(), shape, "broadcast_to") != shape) {
    throw ShapeError("broadcast_to: shape " + x.shape().to_string() + " cannot be broadcast to " +
                     shape.to_string());
  }
  // A stride-0 view: no copy.
  std::vector<std::int64_t> strides(static_cast<std::size_t>(shape.rank()), 0);
  const int lead = shape.rank() - x.rank();
  for (int i = 0; i < x.rank(); ++i) {
    if (x.shape()[i] != 1)
      strides[static_cast<std::size_t>(i + lead)] = x.strides()[static_cast<std::size_t>(i)];
  }
  Tensor out = core::make_view(x, shape, strides, x.offset());
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<BroadcastBackward>();
  node->input_shape = x.shape();
  return autograd::record(out, node, {x});
}

}  // namespace mixprec
