// cast / Tensor::to(dtype): differentiable between floating dtypes (the gradient is cast back to
// the input dtype, so a float32 master variable receives a float32 gradient).
#include "ops/cast.h"

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/dispatch.h"
#include "core/transfer.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

std::vector<Tensor> ops::CastBackward::backward(const Tensor& g) { return {cast(g, input_dtype)}; }

Tensor cast(const Tensor& x, DType dtype) {
  ops::check_defined("cast", x);
  if (x.dtype() == dtype) return x;
  Tensor out = backend_for(x.device()).tensor->cast(x, dtype);
  if (!is_floating(dtype) || !autograd::needs_record({&x})) return out;
  auto node = std::make_shared<ops::CastBackward>();
  node->input_dtype = x.dtype();
  return autograd::record(out, node, {x});
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  // A CUDA tensor is copied to the host first (waits for the GPU).
  const Tensor host = core::transfer(detach(), Device::cpu());
  // Always a fresh contiguous copy.
  const Tensor values = backend_for(Device::cpu()).tensor->cast(host, dtype_of<T>());
  const T* p = static_cast<const T*>(values.data_ptr());
  return std::vector<T>(p, p + values.numel());
}

#define MIXPREC_TO_VECTOR(e, T, name) template std::vector<T> Tensor::to_vector<T>() const;
MIXPREC_FOR_EACH_DTYPE(MIXPREC_TO_VECTOR)
#undef MIXPREC_TO_VECTOR

double Tensor::item() const {
  if (numel() != 1) {
    throw ValueError("item: expected a tensor with one element, got shape " + shape().to_string());
  }
  return to_vector<double>()[0];
}

template <typename T>
T Tensor::item() const {
  if (numel() != 1) {
    throw ValueError("item<" + std::string(dtype_name(dtype_of<T>())) +
                     ">: expected a tensor with one element, got shape " + shape().to_string());
  }
  return to_vector<T>()[0];
}

#define MIXPREC_ITEM(e, T, name) template T Tensor::item<T>() const;
MIXPREC_FOR_EACH_DTYPE(MIXPREC_ITEM)
#undef MIXPREC_ITEM

}  // namespace mixprec
