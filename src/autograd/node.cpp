#include "autograd/node.h"

#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/ops.h"

namespace mixprec::autograd {

bool sole_handle(const Tensor& t) {
  const std::shared_ptr<TensorImpl>& impl = t.impl_ptr();
  return impl.use_count() == 1 && impl->storage.use_count() == 1 && !impl->requires_grad &&
         !impl->grad_fn && impl->offset == 0 && t.is_contiguous();
}

std::vector<Tensor> AccumulateGrad::backward(const Tensor& grad_output) {
  auto variable = variable_.lock();
  if (!variable) return {};
  Tensor& grad = variable->grad;
  // Never an alias of a tensor someone else holds: later accumulation or an in-place update
  // (unscaling, clipping) must not write into it. The engine usually hands over a gradient whose
  // only handle is its own; that one is kept instead of copied (a 4096 x 4096 float32 kernel
  // gradient is 64 MiB of copying per step otherwise).
  if (grad.defined()) {
    grad = add(grad, grad_output);
  } else {
    grad = sole_handle(grad_output) ? grad_output : fresh_copy(grad_output);
  }
  return {};
}

Tensor fresh_copy(const Tensor& t) {
  Tensor out = core::make_tensor(t.shape(), t.dtype(), t.device());
  backend_for(t.device()).tensor->copy(t.detach(), out);
  return out;
}

bool needs_record(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool needs_record(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

std::shared_ptr<Node> edge_to(const Tensor& input) {
  if (!input.defined() || !input.requires_grad()) return nullptr;
  TensorImpl* impl = input.impl();
  if (impl->grad_fn) return impl->grad_fn;
  if (!impl->grad_accumulator) {
    auto acc = std::make_shared<AccumulateGrad>(input.impl_ptr());
    acc->output_shape = impl->shape;
    acc->output_dtype = impl->dtype;
    impl->grad_accumulator = acc;
  }
  return impl->grad_accumulator;
}

Tensor record(Tensor output, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs) {
  if (!needs_record(inputs)) return output;
  node->next.reserve(inputs.size());
  for (const Tensor& input : inputs) node->next.push_back(edge_to(input));
  node->output_shape = output.shape();
  node->output_dtype = output.dtype();
  TensorImpl* impl = output.impl();
  impl->grad_fn = std::move(node);
  impl->requires_grad = true;
  return output;
}

}  // namespace mixprec::autograd
