#include "mixed_precision/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/optimizer_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"

namespace mixprec::mixed_precision::detail {

namespace {
constexpr double kDefaultInitialScale = 32768.0;  // 2^15, the Keras default
constexpr std::int64_t kDefaultGrowthSteps = 2000;

void check_scale(const char* what, double scale) {
  if (!(std::isfinite(scale) && scale > 0.0)) {
    throw ValueError(std::string("LossScaleOptimizer: ") + what +
                     " must be positive and finite, got " + std::to_string(scale));
  }
}
}  // namespace

LossScale::LossScale(const LossScaleOptions& options) : dynamic_(options.dynamic) {
  if (!dynamic_ && !options.initial_scale) {
    throw ValueError(
        "LossScaleOptimizer: a fixed loss scale (dynamic = false) needs initial_scale, e.g. "
        "{.dynamic = false, .initial_scale = 1024}");
  }
  if (!dynamic_ && options.dynamic_growth_steps) {
    throw ValueError(
        "LossScaleOptimizer: dynamic_growth_steps applies only to a dynamic loss scale; remove it "
        "or set dynamic = true");
  }
  growth_steps_ = options.dynamic_growth_steps.value_or(kDefaultGrowthSteps);
  if (growth_steps_ < 1) {
    throw ValueError("LossScaleOptimizer: dynamic_growth_steps must be at least 1, got " +
                     std::to_string(growth_steps_));
  }
  state_.scale = options.initial_scale.value_or(kDefaultInitialScale);
  check_scale("initial_scale", state_.scale);
}

UnscaledGradients LossScale::unscale_and_check(const std::vector<Tensor>& grads) const {
  NoGradScope no_grad;
  UnscaledGradients result;
  result.gradients.resize(grads.size());
  bool finite = true;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (!is_floating(g.dtype())) {
      throw DTypeError("LossScaleOptimizer: gradient " + std::to_string(i) + " is " +
                       std::string(dtype_name(g.dtype())) + " " + g.shape().to_string() +
                       "; gradients must be floating point");
    }
    if (!g.device().is_cpu()) {
      throw DeviceError("LossScaleOptimizer: gradient " + std::to_string(i) + " is on " +
                        g.device().to_string() +
                        " but the first gradient is on the CPU; keep every gradient on the "
                        "variables' device");
    }
    Tensor out = core::make_tensor(g.shape(), DType::float32, g.device());
    // Every gradient is unscaled even after a non-finite one: the caller gets all of them back.
    finite = cpu::unscale_and_check(g, state_.scale, out) && finite;
    result.gradients[i] = out;
  }
  result.outcome = finite ? StepOutcome::finite : StepOutcome::non_finite;
  return result;
}

void LossScale::update(StepOutcome outcome) {
  // A double scale doubles to Inf only past DBL_MAX; it then stays where it is (a float32 loss
  // times such a scale is Inf anyway, and the next steps will halve it).
  cuda::apply_loss_scale_rule(outcome == StepOutcome::non_finite, mode(), growth_steps_,
                              state_.scale, state_.counter, state_.skipped,
                              state_.consecutive_skipped, state_.last_skipped);
}

void LossScale::set_state(const LossScaleState& state) {
  check_scale("loss_scale", state.scale);
  if (state.counter < 0 || state.skipped < 0 || state.consecutive_skipped < 0 ||
      state.consecutive_skipped > state.skipped) {
    throw ValueError("LossScaleOptimizer: invalid counters in the restored state (counter " +
                     std::to_string(state.counter) + ", skipped " + std::to_string(state.skipped) +
                     ", consecutive skipped " + std::to_string(state.consecutive_skipped) + ")");
  }
  state_ = state;
}

cuda::DeviceLossScale to_device_state(const LossScaleState& state) {
  // The largest power of two a float holds: a float32 scaled loss past it is Inf anyway.
  constexpr double kMaxFloatScale = 0x1p127;
  cuda::DeviceLossScale d;
  d.scale = static_cast<float>(std::min(state.scale, kMaxFloatScale));
  d.found_inf = 0;
  d.counter = state.counter;
  d.skipped = state.skipped;
  d.consecutive_skipped = state.consecutive_skipped;
  d.last_skipped = state.last_skipped ? 1 : 0;
  return d;
}

LossScaleState from_device_state(const cuda::DeviceLossScale& state) {
  return {.scale = static_cast<double>(state.scale),
          .counter = state.counter,
          .skipped = state.skipped,
          .consecutive_skipped = state.consecutive_skipped,
          .last_skipped = state.last_skipped != 0};
}

}  // namespace mixprec::mixed_precision::detail
