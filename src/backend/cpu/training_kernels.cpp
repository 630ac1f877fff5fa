// The cpu backend's TrainingKernels table (backend/training_kernels.h): the loops of
// optimizer_kernels.cpp over host memory, and the loss-scale state as 40 bytes of host memory
// updated by the shared kernel_math rule.
#include "backend/training_kernels.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

// One parallel region for every variable (cpu::update_all), after every operand is checked.
void multi_tensor_update(const kernel_math::UpdateRule& rule,
                         std::span<const UpdateOperand> operands, const Tensor& found_inf) {
  if (found_inf.defined() && *static_cast<const std::int32_t*>(found_inf.data_ptr()) != 0) return;
  const int slots = kernel_math::update_slot_count(rule.kind);
  std::vector<UpdateArrays> arrays(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const UpdateOperand& op = operands[i];
    UpdateArrays& a = arrays[i];
    for (int k = 0; k < slots; ++k) {
      if (!op.slots[static_cast<std::size_t>(k)].defined()) {
        throw ValueError("multi_tensor_update: a variable lacks slot " + std::to_string(k) +
                         " of its update (" + std::to_string(slots) + " slots)");
      }
      a.slots[k] = float_data(op.slots[static_cast<std::size_t>(k)]);
    }
    a.variable = float_data(op.variable);
    a.gradient = static_cast<const float*>(op.gradient.data_ptr());
    a.n = op.variable.numel();
    a.clip_scale = op.clip_scale;
  }
  // A rule whose constants are in memory (a recorded step, core::ReplayParameters) runs with them.
  kernel_math::UpdateRule resolved = rule;
  resolved.constants = kernel_math::constants_to_use(rule.constants, rule.constants_in_memory);
  resolved.constants_in_memory = nullptr;
  update_all(resolved, arrays);
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

// Every defined gradient in one parallel region (cpu::unscale_and_check_all); every gradient is
// unscaled even after a non-finite one: the caller gets all of them back.
std::vector<Tensor> unscale_and_check(const std::vector<Tensor>& grads, const Tensor& state) {
  NoGradScope no_grad;
  LossScaleState* s = state_of(state);
  std::vector<Tensor> result(grads.size());
  std::vector<Tensor> defined, outs;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    check_gradient(g, i, state.device());
    result[i] = core::make_tensor(g.shape(), DType::float32, g.device());
    defined.push_back(g);
    outs.push_back(result[i]);
  }
  const bool finite = unscale_and_check_all(defined, static_cast<double>(s->scale), outs);
  s->found_inf = finite ? 0 : 1;
  return result;
}

void check_finite(const std::vector<Tensor>& grads, const Tensor& state) {
  NoGradScope no_grad;
  std::vector<Tensor> defined;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    check_gradient(grads[i], i, state.device());
    defined.push_back(grads[i]);
  }
  const bool finite = unscale_and_check_all(defined, 1.0, {});
  state_of(state)->found_inf = finite ? 0 : 1;
}

std::vector<double> sums_of_squares(Device, const std::vector<Tensor>& tensors) {
  std::vector<std::pair<const float*, std::int64_t>> arrays(tensors.size(), {nullptr, 0});
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (t.dtype() != DType::float32 || !t.is_contiguous()) {
      throw ValueError("sums_of_squares expects contiguous float32 tensors");
    }
    arrays[i] = {static_cast<const float*>(t.data_ptr()), t.numel()};
  }
  return cpu::sums_of_squares(arrays);
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

template <typename T>
void moving_average_of(const MovingAverageOperand& op, double momentum) {
  Tensor moving = op.moving;  // a handle to write through
  T* m = static_cast<T*>(moving.data_ptr());
  const T* v = static_cast<const T*>(op.value.data_ptr());
  const T k = static_cast<T>(momentum), w = static_cast<T>(op.weight);
  for (std::int64_t i = 0; i < moving.numel(); ++i) {
    m[i] = kernel_math::moving_average_element(m[i], v[i], k, w);
  }
}

void moving_average(std::span<const MovingAverageOperand> operands, double momentum) {
  for (const MovingAverageOperand& op : operands) {
    if (op.moving.dtype() == DType::float64) {
      moving_average_of<double>(op, momentum);
    } else {
      moving_average_of<float>(op, momentum);
    }
  }
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
    .moving_average = moving_average,
};

}  // namespace mixprec::cpu
