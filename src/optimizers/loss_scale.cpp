// The loss scale of a LossScaleOptimizer (loss_scale.h): configuration checks, the placement of
// its state on the variables' device, and the calls into that device's TrainingKernels.
#include "optimizers/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/backend.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::optimizers::detail {

namespace {
constexpr double kDefaultInitialScale = 32768.0;  // 2^15, the Keras default
constexpr std::int64_t kDefaultGrowthSteps = 2000;
// The largest power of two in float32: the scale lives in float32 (the dtype of the scaled loss),
// and dynamic scaling never doubles past it (kernel_math::can_double).
constexpr double kMaxScale = 0x1p127;

// The float32 scale of a requested one: positive and finite, above 2^127 clamped to 2^127.
float checked_scale(const char* what, double scale) {
  const float value = static_cast<float>(std::min(scale, kMaxScale));
  if (!(std::isfinite(scale) && scale > 0.0 && value > 0.0f)) {
    throw ValueError(std::string("LossScaleOptimizer: ") + what +
                     " must be positive and finite (and at least the smallest float32), got " +
                     std::to_string(scale));
  }
  return value;
}
}  // namespace

LossScale::LossScale(const mixed_precision::LossScaleOptions& options) {
  if (!options.dynamic && !options.initial_scale) {
    throw ValueError(
        "LossScaleOptimizer: a fixed loss scale (dynamic = false) needs initial_scale, e.g. "
        "{.dynamic = false, .initial_scale = 1024}");
  }
  if (!options.dynamic && options.dynamic_growth_steps) {
    throw ValueError(
        "LossScaleOptimizer: dynamic_growth_steps applies only to a dynamic loss scale; remove it "
        "or set dynamic = true");
  }
  rule_.mode =
      options.dynamic ? kernel_math::LossScaleMode::dynamic : kernel_math::LossScaleMode::fixed;
  rule_.growth_steps = options.dynamic_growth_steps.value_or(kDefaultGrowthSteps);
  if (rule_.growth_steps < 1) {
    throw ValueError("LossScaleOptimizer: dynamic_growth_steps must be at least 1, got " +
                     std::to_string(rule_.growth_steps));
  }
  initial_.scale =
      checked_scale("initial_scale", options.initial_scale.value_or(kDefaultInitialScale));
}

const Tensor& LossScale::state_on(Device device) {
  if (!state_.defined()) {
    state_ = backend_for(device).training->make_loss_scale_state(device, initial_);
  } else if (!(state_.device() == device)) {
    const LossScaleState current = state();
    state_ = backend_for(device).training->make_loss_scale_state(device, current);
  }
  return state_;
}

LossScaleState LossScale::state() const {
  if (!state_.defined()) return initial_;
  if (!cached_) cached_ = backend_for(state_.device()).training->read_loss_scale_state(state_);
  return *cached_;
}

void LossScale::set_state(const LossScaleState& state) {
  if (state.counter < 0 || state.skipped < 0 || state.consecutive_skipped < 0 ||
      state.consecutive_skipped > state.skipped) {
    throw ValueError("LossScaleOptimizer: invalid counters in the restored state (counter " +
                     std::to_string(state.counter) + ", skipped " + std::to_string(state.skipped) +
                     ", consecutive skipped " + std::to_string(state.consecutive_skipped) + ")");
  }
  LossScaleState value = state;
  value.scale = checked_scale("loss_scale", static_cast<double>(state.scale));
  value.found_inf = 0;
  value.last_skipped = state.last_skipped != 0 ? 1 : 0;
  if (state_.defined()) {
    backend_for(state_.device()).training->write_loss_scale_state(state_, value);
    cached_ = value;
  } else {
    initial_ = value;
  }
}

Tensor LossScale::scaled_loss(const Tensor& loss) {
  // A 0-d float32 alias of the state's scale: mul reads the value current when it runs, and the
  // backward pass (run before this step's rule) reads the same value.
  const Tensor scale = loss_scale_view(state_on(loss.device()));
  switch (loss.dtype()) {
    case DType::float32: return mul(loss, scale);
    case DType::float64: return mul(loss, cast(scale, DType::float64));
    default:
      // 16-bit: scaled in float32 and rounded once (the scale itself may exceed float16's range).
      return cast(mul(cast(loss, DType::float32), scale), loss.dtype());
  }
}

namespace {
// The device of the defined tensors (the first one's; the kernels reject others), or `fallback`.
Device device_of(const std::vector<Tensor>& tensors, Device fallback) {
  for (const Tensor& t : tensors) {
    if (t.defined()) return t.device();
  }
  return fallback;
}
}  // namespace

std::vector<Tensor> LossScale::unscale_and_check(const std::vector<Tensor>& grads) {
  const Device device = device_of(grads, this->device());
  const Tensor& state = state_on(device);
  return backend_for(device).training->unscale_and_check(grads, state);
}

void LossScale::check_finite(const std::vector<Tensor>& grads, Device device) {
  backend_for(device).training->check_finite(grads, state_on(device));
}

Tensor LossScale::found_inf(Device device) { return found_inf_view(state_on(device)); }

void LossScale::step(Device device) {
  backend_for(device).training->loss_scale_step(state_on(device), rule_);
  cached_.reset();
}

bool LossScale::stuck(std::int64_t steps) const {
  return kernel_math::loss_scale_stuck(state(), steps);
}

}  // namespace mixprec::optimizers::detail
