// Elementwise unary ops: forward and fused backward kernels in cpu/unary.cpp and
// cuda/kernels/elementwise.cu, chosen by the tensor's device.
#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct UnaryBackward final : autograd::Node {
  UnaryOp op;
  Tensor x, y;
  std::vector<Tensor> backward(const Tensor& g) override {
    if (op == UnaryOp::neg) return {neg(g)};
    ops::check_same_device(name().c_str(), g, x);
    return {backend_for(g.device()).tensor->unary_backward(op, g, x, y)};
  }
  std::string name() const override { return std::string(op_name(op)) + "Backward"; }
  void release_saved() override { x = y = Tensor(); }
};

Tensor unary_op(UnaryOp op, const Tensor& x) {
  const char* name = op_name(op);
  ops::check_floating(name, x);
  Tensor out = backend_for(x.device()).tensor->unary(op, x);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<UnaryBackward>();
  node->op = op;
  if (op == UnaryOp::relu || op == UnaryOp::relu6) {
    // Their derivative depends only on which side of the kinks x lies, and y = op(x) is exact and
    // lies on the same side (0 < y < 6 exactly when 0 < x < 6; NaN stays NaN): keep y alone, so
    // the input (a BatchNormalization output in the CNN blocks) is freed after the forward.
    node->x = node->y = out.detach();
  } else if (op != UnaryOp::neg) {
    node->x = x.detach(), node->y = out.detach();
  }
  return autograd::record(out, node, {x});
}

}  // namespace

Tensor neg(const Tensor& x) { return unary_op(UnaryOp::neg, x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::log, x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op(UnaryOp::rsqrt, x); }
Tensor abs(const Tensor& x) { return unary_op(UnaryOp::abs, x); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::relu, x); }
Tensor relu6(const Tensor& x) { return unary_op(UnaryOp::relu6, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::sigmoid, x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::tanh, x); }
Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  return unary_op(approximation == GeluApproximation::tanh ? UnaryOp::gelu_tanh : UnaryOp::gelu, x);
}
Tensor silu(const Tensor& x) { return unary_op(UnaryOp::silu, x); }

}  // namespace mixprec
