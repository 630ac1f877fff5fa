// softmax and log_softmax over one axis: fused forward and backward kernels in cpu/softmax.cpp and
// cuda/kernels/softmax.cu, by the tensor's device.
// Both save only their output y; the backward is computed from it.
#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct SoftmaxBackward final : autograd::Node {
  SoftmaxKind kind = SoftmaxKind::softmax;
  int axis = 0;
  Tensor y;  // the forward output, in the input dtype
  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, y);
    return {backend_for(g.device()).tensor->softmax_backward(kind, g, y, axis)};
  }
  std::string name() const override {
    return kind == SoftmaxKind::softmax ? "SoftmaxBackward" : "LogSoftmaxBackward";
  }
  void release_saved() override { y = Tensor(); }
};

Tensor softmax_op(SoftmaxKind kind, const Tensor& x, int axis) {
  const char* name = op_name(kind);
  ops::check_floating(name, x);
  const int a = normalize_axis(axis, x.rank(), name);
  Tensor out = backend_for(x.device()).tensor->softmax_forward(kind, x, a);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<SoftmaxBackward>();
  node->kind = kind;
  node->axis = a;
  node->y = out.detach();
  return autograd::record(out, node, {x});
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) { return softmax_op(SoftmaxKind::softmax, x, axis); }
Tensor log_softmax(const Tensor& x, int axis) {
  return softmax_op(SoftmaxKind::log_softmax, x, axis);
}

}  // namespace mixprec
