// Comparisons (not differentiable), where (differentiable in both branches) and finiteness; CPU or
// CUDA kernels by the operands' device.
#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

Tensor compare_op(CompareOp op, const char* name, const Tensor& a, const Tensor& b) {
  ops::check_same_dtype_device(name, a, b);
  broadcast_shapes(a.shape(), b.shape(), name);
  return backend_for(a.device()).tensor->compare(op, a, b);
}

Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return backend_for(a.device()).tensor->where(cond, a, b);
}

struct WhereBackward final : autograd::Node {
  Tensor cond;
  Shape a_shape, b_shape;
  std::vector<Tensor> backward(const Tensor& g) override {
    const Tensor zero = zeros_like(g);
    return {sum_to(where_kernel(cond, g, zero), a_shape),
            sum_to(where_kernel(cond, zero, g), b_shape)};
  }
  std::string name() const override { return "WhereBackward"; }
  void release_saved() override { cond = Tensor(); }
};

}  // namespace

Tensor equal(const Tensor& a, const Tensor& b) {
  return compare_op(CompareOp::equal, "equal", a, b);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return compare_op(CompareOp::not_equal, "not_equal", a, b);
}
Tensor less(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::less, "less", a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return compare_op(CompareOp::less_equal, "less_equal", a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return compare_op(CompareOp::greater, "greater", a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return compare_op(CompareOp::greater_equal, "greater_equal", a, b);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ops::check_defined("where", cond);
  if (cond.dtype() != DType::bool_) {
    throw DTypeError("where: the condition must be bool, got " + ops::describe(cond) +
                     "; build it with a comparison such as greater(x, y)");
  }
  ops::check_same_dtype_device("where", a, b);
  ops::check_floating("where", a);
  ops::check_same_device("where", cond, a);
  broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = where_kernel(cond, a, b);
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<WhereBackward>();
  node->cond = cond.detach();
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  return autograd::record(out, node, {a, b});
}

Tensor is_finite(const Tensor& x) {
  ops::check_defined("is_finite", x);
  return backend_for(x.device()).tensor->is_finite(x);
}

bool all_finite(const Tensor& x) {
  ops::check_defined("all_finite", x);
  return backend_for(x.device()).tensor->all_finite(x);
}

}  // namespace mixprec
