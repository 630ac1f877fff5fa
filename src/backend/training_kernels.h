// Optimizer updates, gradient preparation and loss scaling of one device kind (issue 10 items 3
// and 4). The per-element bodies every entry runs are in backend/kernel_math/training.h, shared
// by the CPU loops and the CUDA multi-tensor kernels; src/optimizers reaches these entries through
// backend_for(device).training and never branches on the device kind.
//
// The loss-scale state (kernel_math::LossScaleState) is a 6-element int64 tensor on the variables'
// device (host memory on the CPU). Its found_inf member is the one skip mechanism:
// unscale_and_check and check_finite set it, multi_tensor_update reads it (through
// found_inf_view(), a 0-d int32 alias of the flag) and leaves everything untouched when it is set,
// loss_scale_step applies the loss-scale rule to it and clears it. On a GPU nothing here waits for
// the device except the entries documented as synchronising.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/kernel_math/training.h"
#include "mixprec/device.h"
#include "mixprec/tensor.h"

namespace mixprec {

// One variable of a multi-tensor update: contiguous float32 tensors on one device.
struct UpdateOperand {
  Tensor variable;          // updated in place
  Tensor gradient;          // same element count
  float clip_scale = 1.0f;  // clipnorm / global_clipnorm factor (1: none)
  // The first update_slot_count(rule.kind) are defined, same element count, updated in place.
  std::array<Tensor, kernel_math::kMaxUpdateSlots> slots;
};

// One moving average of moving_average: moving (updated in place) and value, contiguous tensors of
// one dtype (float32 or float64) and element count on one device; weight the value's factor.
struct MovingAverageOperand {
  Tensor moving;
  Tensor value;
  double weight = 0.0;
};

// How the loss-scale state changes each step.
struct LossScaleRule {
  kernel_math::LossScaleMode mode = kernel_math::LossScaleMode::dynamic;
  std::int64_t growth_steps = 2000;
};

struct TrainingKernels {
  // The update of `rule` over every operand (all on one device). found_inf: undefined (never
  // skip) or a 0-d int32 tensor on that device (found_inf_view of a loss-scale state); when it is
  // non-zero at the time the update runs, variables and slots stay bit-identical. Enqueues only.
  void (*multi_tensor_update)(const kernel_math::UpdateRule& rule,
                              std::span<const UpdateOperand> operands, const Tensor& found_inf);
  // Each defined gradient (any floating dtype, any strides, on the state's device) times
  // 1 / scale into a new contiguous float32 tensor (unscale_element); the state's found_inf is
  // set to 1 when some result is Inf or NaN, to 0 otherwise. Undefined gradients stay undefined.
  std::vector<Tensor> (*unscale_and_check)(const std::vector<Tensor>& grads, const Tensor& state);
  // The state's found_inf set as unscale_and_check would (with scale 1), writing nothing else.
  void (*check_finite)(const std::vector<Tensor>& grads, const Tensor& state);
  // sum(x^2) in double of each contiguous float32 tensor on `device` (undefined: 0), in a fixed
  // order (reproducible clipping). Synchronises on a GPU (the sums come back to the host).
  std::vector<double> (*sums_of_squares)(Device device, const std::vector<Tensor>& tensors);

  // A new loss-scale state on `device` holding `value`.
  Tensor (*make_loss_scale_state)(Device device, const kernel_math::LossScaleState& value);
  // *state = value (enqueued on a GPU).
  void (*write_loss_scale_state)(const Tensor& state, const kernel_math::LossScaleState& value);
  // The state's value. Synchronises on a GPU (waits for the queued work).
  kernel_math::LossScaleState (*read_loss_scale_state)(const Tensor& state);
  // kernel_math::loss_scale_step on the state: the rule applied to found_inf, which is cleared.
  void (*loss_scale_step)(const Tensor& state, const LossScaleRule& rule);
  // moving = moving * momentum + value * weight (kernel_math::moving_average_element, momentum and
  // weight rounded to the operands' dtype) for every operand, in place; the operands are checked
  // by ops::moving_average_update. Enqueues only (one launch for a few small operands on a GPU).
  void (*moving_average)(std::span<const MovingAverageOperand> operands, double momentum);
};

// A 0-d float32 tensor aliasing a loss-scale state's scale (no copy, no autograd): ops that read
// it see the scale current when they run. Device independent (backend/training_views.cpp).
Tensor loss_scale_view(const Tensor& state);
// A 0-d int32 tensor aliasing the state's found_inf flag, for multi_tensor_update.
Tensor found_inf_view(const Tensor& state);

}  // namespace mixprec
