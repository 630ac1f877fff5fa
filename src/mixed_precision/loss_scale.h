// The loss-scale state machine of DESIGN §2.5 (§7.5: a small interface, its state is data):
// scale(), unscale_and_check() and update(). LossScaleOptimizer owns one. The rule of update() is
// cuda::apply_loss_scale_rule, shared with the device-side state of CUDA training
// (backend/cuda/optimizers.h), so both follow one definition.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/optimizers.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/tensor.h"

namespace mixprec::mixed_precision::detail {

struct LossScaleState {
  double scale = 32768.0;
  std::int64_t counter = 0;  // finite steps since the scale last changed (dynamic only)
  std::int64_t skipped = 0;
  std::int64_t consecutive_skipped = 0;
  bool last_skipped = false;
};

enum class StepOutcome { finite, non_finite };

struct UnscaledGradients {
  std::vector<Tensor> gradients;  // float32; undefined where the input was undefined
  StepOutcome outcome = StepOutcome::finite;
};

class LossScale {
 public:
  // Validates and applies the defaults (ValueError on invalid options).
  explicit LossScale(const LossScaleOptions& options);

  double scale() const { return state_.scale; }
  bool dynamic() const { return dynamic_; }
  cuda::LossScaleMode mode() const {
    return dynamic_ ? cuda::LossScaleMode::dynamic : cuda::LossScaleMode::fixed;
  }
  std::int64_t growth_steps() const { return growth_steps_; }

  // Each gradient divided by scale() into a new float32 tensor, checked for Inf/NaN in the same
  // pass (cpu::unscale_and_check).
  UnscaledGradients unscale_and_check(const std::vector<Tensor>& grads) const;
  // Records a step's outcome: counts skipped steps and, when dynamic, halves the scale (not
  // below 1) on non-finite steps and doubles it (never to Inf) after growth_steps finite ones.
  void update(StepOutcome outcome);

  const LossScaleState& state() const { return state_; }
  // Validates (ValueError) and replaces the state.
  void set_state(const LossScaleState& state);

 private:
  bool dynamic_;
  std::int64_t growth_steps_;
  LossScaleState state_;
};

// The host state as the device keeps it (float scale, a scale past 2^127 clamped to 2^127;
// found_inf clear) and back.
cuda::DeviceLossScale to_device_state(const LossScaleState& state);
LossScaleState from_device_state(const cuda::DeviceLossScale& state);

}  // namespace mixprec::mixed_precision::detail
