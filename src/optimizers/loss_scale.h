// The loss scale of a LossScaleOptimizer (DESIGN §2.5; §7.5: a small interface, its state is
// data): its validated configuration and its state, one kernel_math::LossScaleState in the
// variables' device memory (host memory on the CPU). scale / unscale-and-check / the step's rule /
// stuck() are written once here and reach the device through backend_for(device).training; the
// per-element bodies and the rule itself are in backend/kernel_math/training.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/kernel_math/training.h"
#include "backend/training_kernels.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/tensor.h"

namespace mixprec::optimizers::detail {

using kernel_math::LossScaleState;

class LossScale {
 public:
  // Validates and applies the defaults (ValueError on invalid options).
  explicit LossScale(const mixed_precision::LossScaleOptions& options);

  bool dynamic() const { return rule_.mode == kernel_math::LossScaleMode::dynamic; }
  std::int64_t growth_steps() const { return rule_.growth_steps; }
  // Where the state lives (the CPU until it is first used).
  Device device() const { return state_.defined() ? state_.device() : Device::cpu(); }

  // The current state. Reads the device state back when it lives on a GPU and changed since the
  // last read (a synchronisation); before the first step, the initial state.
  LossScaleState state() const;
  // Validates (ValueError) and replaces the state (on its device, when it has one).
  void set_state(const LossScaleState& state);

  // loss * scale, in the loss's dtype, the scale read on the loss's device when the op runs.
  Tensor scaled_loss(const Tensor& loss);
  // Each gradient divided by the scale into a new float32 tensor; the state's found_inf flag
  // records whether some result is Inf or NaN.
  std::vector<Tensor> unscale_and_check(const std::vector<Tensor>& grads);
  // The found_inf flag set from `grads` (already unscaled) on `device`.
  void check_finite(const std::vector<Tensor>& grads, Device device);
  // The flag, as the optimizer update reads it (a 0-d int32 tensor on the state's device).
  Tensor found_inf(Device device);
  // Applies the loss-scale rule to the flag (kernel_math::loss_scale_step) and clears it.
  void step(Device device);
  // Whether the last `steps` steps were all skipped with a scale that cannot go lower (a dynamic
  // scale at 1, or a fixed scale): training makes no progress.
  bool stuck(std::int64_t steps) const;

 private:
  // The state tensor on `device`: created there from the initial state on first use, moved there
  // (one read) when the tensors have moved to another device since.
  const Tensor& state_on(Device device);

  LossScaleRule rule_;
  LossScaleState initial_;  // the state until it is placed on a device
  Tensor state_;            // kernel_math::LossScaleState on its device, once placed
  mutable std::optional<LossScaleState> cached_;  // state_'s value when read since its last change
};

}  // namespace mixprec::optimizers::detail
