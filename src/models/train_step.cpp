// The training step of fit() and train_on_batch() in plain steps (train_step.h), and the
// stuck-loss-scale check that follows a step.
#include "models/train_step.h"

#include <cstdio>
#include <string>
#include <vector>

#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::models {

StepContext::StepContext(const Model& m, TrainingState& s)
    : model(m),
      state(s),
      device(model_device(m)),
      loss_scale(s.loss_scale ? &*s.loss_scale : nullptr) {}

StepBatch to_step_device(const StepContext& ctx, const Tensor& x, const Tensor& y) {
  const auto place = [&ctx](const Tensor& t) {
    return t.device() == ctx.device ? t : t.to(ctx.device);
  };
  return {place(x), place(y)};
}

Tensor forward(StepContext& ctx, const Tensor& x) {
  const Tensor y_pred = ctx.model(x, CallOptions{.training = true});
  if (!ctx.state.outputs_checked) check_output_dtypes(ctx.model, ctx.state);
  if (!ctx.variables) ctx.variables = ctx.model.trainable_variables();
  return y_pred;
}

Tensor compute_loss(const StepContext& ctx, const Tensor& y, const Tensor& y_pred) {
  return batch_loss(ctx.state, y, y_pred);
}

std::vector<Tensor> backward(const StepContext& ctx, const Tensor& loss) {
  const std::vector<Tensor>& variables = ctx.variables.value();
  if (!ctx.loss_scale) return grad(loss, variables);
  const mixed_precision::LossScaleOptimizer& lso = *ctx.loss_scale;
  return lso.get_unscaled_gradients(grad(lso.get_scaled_loss(loss), variables));
}

void optimizer_step(StepContext& ctx, const std::vector<Tensor>& grads) {
  ctx.state.optimizer.apply_gradients(grads, ctx.variables.value());
  if (ctx.state.keep_last_gradients) ctx.state.last_gradients = grads;
}

namespace {

// Host synchronisation rule (training_state.h, LossTracker): on a CUDA device nothing per step
// reads a value back; the loss-scale state is read every kStuckScaleCheckSteps steps there.
bool reads_are_cheap(const StepContext& ctx) { return !ctx.device.is_cuda(); }

// The loss scale a step runs with, read before it for the CPU's stuck check (loss_scale_stuck);
// 0 where reading it would synchronise with a GPU.
double scale_before_step(const StepContext& ctx) {
  return ctx.loss_scale && reads_are_cheap(ctx) ? ctx.loss_scale->loss_scale() : 0.0;
}

// Whether the loss scale is stuck after a step that applied gradients: a scale that cannot go
// lower (a dynamic scale at 1, or a fixed scale) has seen kStuckScaleSteps consecutive skipped
// steps, so training makes no progress. Re-derived here from the optimizer's counters; this is
// the one function to switch to LossScaleOptimizer::stuck() (issue 10 item 4).
bool loss_scale_stuck(StepContext& ctx, double scale_before) {
  const mixed_precision::LossScaleOptimizer& lso = *ctx.loss_scale;
  TrainingState& state = ctx.state;
  if (!reads_are_cheap(ctx)) {
    // The GPU keeps the count of consecutive skipped steps itself; read it (and the scale) every
    // kStuckScaleCheckSteps steps. A dynamic scale halves on each skipped step, so a run of
    // kStuckScaleSteps skips that ends at scale 1 includes the ~15 halvings from 2^15: the error
    // may come up to that many steps sooner than on the CPU, and up to kStuckScaleCheckSteps later.
    if (++state.steps_since_scale_check < kStuckScaleCheckSteps) return false;
    state.steps_since_scale_check = 0;
    const double scale = lso.loss_scale();
    return lso.consecutive_skipped_steps() >= kStuckScaleSteps && (scale <= 1.0 || !lso.dynamic());
  }
  if (!(lso.last_step_skipped() && (scale_before <= 1.0 || !lso.dynamic()))) {
    state.skipped_at_floor = 0;
    return false;
  }
  if (++state.skipped_at_floor < kStuckScaleSteps) return false;
  state.skipped_at_floor = 0;
  return true;
}

// The stuck-scale error, naming where the model turns non-finite on this batch.
[[noreturn]] void throw_stuck_scale(const StepContext& ctx, const StepBatch& batch,
                                    StepPosition position) {
  // Stuck means a fixed scale, or a dynamic one at its floor of 1 (reading it syncs a GPU once).
  const double scale = ctx.loss_scale->loss_scale();
  const std::string where = position.epoch > 0 ? "fit(), epoch " + std::to_string(position.epoch) +
                                                     ", step " + std::to_string(position.step)
                                               : std::string("train_on_batch()");
  char scale_text[32];
  std::snprintf(scale_text, sizeof scale_text, "%.0f", scale);
  const std::string stuck =
      scale <= 1.0 ? std::string("the loss scale has been 1")
                   : "the fixed loss scale of " + std::string(scale_text) + " has been in place";
  throw Error("model '" + ctx.model.name() + "': " + where + ": " + stuck + " for " +
              std::to_string(kStuckScaleSteps) +
              " consecutive steps and every one had Inf/NaN gradients, so no step was applied; " +
              diagnose_non_finite(ctx.model, ctx.state, batch.x, batch.y));
}

}  // namespace

void train_step(StepContext& ctx, const Tensor& x, const Tensor& y, StepPosition position) {
  const StepBatch batch = to_step_device(ctx, x, y);
  const Tensor y_pred = forward(ctx, batch.x);
  const Tensor loss = compute_loss(ctx, batch.y, y_pred);
  const double scale_before = scale_before_step(ctx);  // for loss_scale_stuck only
  const bool stepped = !ctx.variables->empty();
  if (stepped) optimizer_step(ctx, backward(ctx, loss));
  ctx.state.train_metrics.update(loss, batch.x.dim(0), batch.y, y_pred);
  if (!stepped || !ctx.loss_scale || !loss_scale_stuck(ctx, scale_before)) return;
  throw_stuck_scale(ctx, batch, position);
}

}  // namespace mixprec::models
