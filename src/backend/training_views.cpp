// The device-independent views into a loss-scale state (backend/training_kernels.h): 0-d aliases
// of its float32 scale and its int32 found_inf flag, sharing the state's storage.
#include <memory>

#include "backend/training_kernels.h"
#include "core/tensor_impl.h"

namespace mixprec {

namespace {
Tensor alias(const Tensor& state, DType dtype, std::int64_t offset_in_elements) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = state.impl()->storage;
  impl->shape = Shape();
  impl->strides = {};
  impl->offset = offset_in_elements;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}
}  // namespace

Tensor loss_scale_view(const Tensor& state) {
  static_assert(offsetof(kernel_math::LossScaleState, scale) == 0);
  return alias(state, DType::float32, 0);
}

Tensor found_inf_view(const Tensor& state) {
  static_assert(kernel_math::kFoundInfOffset % sizeof(std::int32_t) == 0);
  return alias(state, DType::int32,
               static_cast<std::int64_t>(kernel_math::kFoundInfOffset / sizeof(std::int32_t)));
}

}  // namespace mixprec
