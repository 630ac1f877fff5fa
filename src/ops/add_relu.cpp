#include "ops/add_relu.h"

#include <memory>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec::ops {

namespace {

constexpr const char* kName = "add_relu";

// g' = g * relu'(y) from the saved output (relu's own backward kernel, as relu's node keeps only y
// too), then each operand's share reduced to its shape, as add's backward.
struct AddReluBackward final : autograd::Node {
  Tensor y;
  Shape a_shape, b_shape;
  std::vector<Tensor> backward(const Tensor& g) override {
    check_same_device(kName, g, y);
    const Tensor through = backend_for(g.device()).tensor->unary_backward(UnaryOp::relu, g, y, y);
    return {sum_to(through, a_shape), sum_to(through, b_shape)};
  }
  std::string name() const override { return "AddReluBackward"; }
  void release_saved() override { y = Tensor(); }
};

}  // namespace

Tensor add_relu(const Tensor& a, const Tensor& b) {
  check_same_dtype_device(kName, a, b);
  check_floating(kName, a);
  broadcast_shapes(a.shape(), b.shape(), kName);  // throws naming this op and both shapes
  Tensor out = backend_for(a.device()).tensor->add_relu(a, b);
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<AddReluBackward>();
  node->y = out.detach();
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  return autograd::record(out, node, {a, b});
}

}  // namespace mixprec::ops
