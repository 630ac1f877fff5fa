// The cpu backend's TrainingKernels table (backend/training_kernels.h): the loops of
// optimizer_kernels.cpp over host memory, and the loss-scale state as 40 bytes of host memory
// updated by the shared kernel_math rule.
#include "backend/training_kernels.h"

#include <cstring>
#include <string>

#include "backend/cpu/optimizer_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using kernel_math::LossScaleState;

// The state's bytes (a handle shares its storage, so a const handle still reaches them).
LossScaleState* state_of(const Tensor& state) {
  return static_cast<LossScaleState*>(Tensor(state).data_ptr());
}

float* float_data(const Tensor& t) { return static_cast<float*>(Tensor(t).data_ptr()); }

void multi_tensor_update(const kernel_math::UpdateRule& rule,
                         std::span<const UpdateOperand> operands, const Tensor& found_inf) {
  if (found_inf.defined() && *static_cast<const std::int32_t*>(found_inf.data_ptr()) != 0) return;
  const int slots = kernel_math::update_slot_count(rule.kind);
  for (const UpdateOperand& op : operands) {
    float* slot_pointers[kernel_math::kMaxUpdateSlots] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < slots; ++k) {
      if (!op.slots[static_cast<std::size_t>(k)].defined()) {
        throw ValueError("multi_tensor_update: a variable lacks slot " + std::to_string(k) +
                         " of its update (" + std::to_string(slots) + " slots)");
      }
      slot_pointers[k] = float_data(op.slots[static_cast<std::size_t>(k)]);
    }
    update(rule, float_data(op.variable), static_cast<const float*>(op.gradient.data_ptr()),
           slot_pointers, op.variable.numel(), op.clip_scale);
  }
}

void check_gradient(const Tensor& g, std::size_t i, Device device) {
  if (!is_floating(g.dtype())) {
    throw DTypeError("LossScaleOptimizer: gradient " + std::to_string(i) + " is " +
                     std::string(dtype_name(g.dtype())) + " " + g.shape().to_string() +
                     "; gradients must be floating point");
  }
  if (!(g.device() == device)) {
    throw DeviceError("LossScaleOptimizer: gradient " + std::to_string(i) + " is on " +
                      g.device().to_string() + " but the loss-scale state is on " +
                      device.to_string() + "; keep every gradient on the variables' device");
  }
}

std::vector<Tensor> unscale_and_check(const std::vector<Tensor>& grads, const Tensor& state) {
  NoGradScope no_grad;
  LossScaleState* s = state_of(state);
  std::vector<Tensor> result(grads.size());
  bool finite = true;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    check_gradient(g, i, state.device());
    Tensor out = core::make_tensor(g.shape(), DType::float32, g.device());
    // Every gradient is unscaled even after a non-finite one: the caller gets all of them back.
    finite = cpu::unscale_and_check(g, static_cast<double>(s->scale), out) && finite;
    result[i] = out;
  }
  s->found_inf = finite ? 0 : 1;
  return result;
}

void check_finite(const std::vector<Tensor>& grads, const Tensor& state) {
  NoGradScope no_grad;
  bool finite = true;
  for (std::size_t i = 0; i < grads.size() && finite; ++i) {
    if (!grads[i].defined()) continue;
    check_gradient(grads[i], i, state.device());
    finite = finite_as_float32(grads[i]);
  }
  state_of(state)->found_inf = finite ? 0 : 1;
}

std::vector<double> sums_of_squares(Device, const std::vector<Tensor>& tensors) {
  std::vector<double> sums(tensors.size(), 0.0);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (t.dtype() != DType::float32 || !t.is_contiguous()) {
      throw ValueError("sums_of_squares expects contiguous float32 tensors");
    }
    sums[i] = sum_of_squares(static_cast<const float*>(t.data_ptr()), t.numel());
  }
  return sums;
}

Tensor make_loss_scale_state(Device device, const LossScaleState& value) {
  Tensor state = core::make_tensor(Shape{6}, DType::int64, device);
  std::memcpy(state.data_ptr(), &value, sizeof value);
  return state;
}

void write_loss_scale_state(const Tensor& state, const LossScaleState& value) {
  std::memcpy(state_of(state), &value, sizeof value);
}

LossScaleState read_loss_scale_state(const Tensor& state) { return *state_of(state); }

void loss_scale_step(const Tensor& state, const LossScaleRule& rule) {
  kernel_math::loss_scale_step(rule.mode, rule.growth_steps, *state_of(state));
}

}  // namespace

extern const TrainingKernels kTrainingKernels;
const TrainingKernels kTrainingKernels{
    .multi_tensor_update = multi_tensor_update,
    .unscale_and_check = unscale_and_check,
    .check_finite = check_finite,
    .sums_of_squares = sums_of_squares,
    .make_loss_scale_state = make_loss_scale_state,
    .write_loss_scale_state = write_loss_scale_state,
    .read_loss_scale_state = read_loss_scale_state,
    .loss_scale_step = loss_scale_step,
};

}  // namespace mixprec::cpu
