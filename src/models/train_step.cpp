// The training step of fit() and train_on_batch() in plain steps (train_step.h), and the
// stuck-loss-scale check that follows a step.
#include "models/train_step.h"

#include <cstdio>
#include <string>
#include <vector>

#include "autograd/gradient_ready.h"
#include "autograd/saved_cast.h"
#include "backend/backend.h"
#include "backend/device_services.h"
#include "distributed/overlapped_reducer.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "optimizers/loss_scale_agreement.h"

namespace mixprec::models {

StepContext::StepContext(const Model& m, TrainingState& s)
    : model(m),
      state(s),
      device(model_device(m)),
      loss_scale(s.loss_scale ? &*s.loss_scale : nullptr),
      reads_are_cheap(backend_for(device).services->execution == Execution::synchronous) {}

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

namespace {

// Whether the gradients are reduced during the backward pass (DataParallel::overlap).
bool overlaps(const StepContext& ctx) {
  return ctx.data_parallel && ctx.data_parallel->overlap && ctx.device.type == DeviceType::cpu &&
         distributed::world_size() > 1;
}

distributed::detail::OverlappedReducer& start_reducer(StepContext& ctx) {
  if (!ctx.reducer) ctx.reducer = std::make_shared<distributed::detail::OverlappedReducer>();
  ctx.reducer->begin(ctx.variables.value(), ctx.shard_weight, ctx.data_parallel->bucket_bytes);
  return *ctx.reducer;
}

// The gradients of `target` with respect to ctx.variables, each bucket summed over the ranks as
// soon as its gradients are final.
std::vector<Tensor> reduced_gradients(StepContext& ctx, const Tensor& target) {
  distributed::detail::OverlappedReducer& reducer = start_reducer(ctx);
  std::vector<Tensor> grads;
  try {
    grads = autograd::grad_reporting_ready(
        target, ctx.variables.value(),
        [&reducer](std::size_t i, const Tensor& g) { reducer.ready(i, g); });
  } catch (...) {
    reducer.abandon();
    throw;
  }
  reducer.finish();
  return grads;
}

}  // namespace

StepGradients backward(StepContext& ctx, const Tensor& loss) {
  const std::vector<Tensor>& variables = ctx.variables.value();
  const bool overlap = overlaps(ctx);
  if (!ctx.loss_scale) {
    return StepGradients{overlap ? reduced_gradients(ctx, loss) : grad(loss, variables)};
  }
  const mixed_precision::LossScaleOptimizer& lso = *ctx.loss_scale;
  const Tensor scaled = lso.get_scaled_loss(loss);
  // Overlapped: the scaled gradients are reduced, then unscaled and checked (the sum carries any
  // rank's Inf or NaN; a power-of-two scale divides out exactly).
  return StepGradients{lso.get_unscaled_gradients(overlap ? reduced_gradients(ctx, scaled)
                                                          : grad(scaled, variables))};
}

void reduce_gradients(StepContext& ctx, const StepGradients& grads) {
  if (!ctx.data_parallel) return;
  if (overlaps(ctx)) {
    // The gradients are reduced already; the loss-scaling verdict is still agreed with max.
    if (grads.unscaled && ctx.loss_scale) {
      optimizers::detail::combine_found_inf(*ctx.loss_scale, [](Tensor& flag) {
        distributed::all_reduce(flag, distributed::ReduceOp::max);
      });
    }
    return;
  }
  if (grads.unscaled && ctx.loss_scale) {
    ctx.data_parallel->all_reduce_gradients(*grads.unscaled, ctx.shard_weight, *ctx.loss_scale);
  } else {
    ctx.data_parallel->all_reduce_gradients(grads.plain, ctx.shard_weight);
  }
}

void optimizer_step(StepContext& ctx, const StepGradients& grads) {
  const std::vector<Tensor>& variables = ctx.variables.value();
  if (grads.unscaled && ctx.loss_scale) {
    // The verdict of the unscale pass is reused: no second check of the gradients.
    ctx.loss_scale->apply_gradients(*grads.unscaled, variables);
  } else {
    ctx.state.optimizer.apply_gradients(grads.list(), variables);
  }
  if (ctx.state.keep_last_gradients) ctx.state.last_gradients = grads.list();
}

namespace {

// Whether the loss scale is stuck after a step (LossScaleOptimizer::stuck: kStuckScaleSteps
// consecutive skipped steps at a scale that cannot go lower). Reading the state waits for a device
// that queues work (a GPU), so there it is read every kStuckScaleCheckSteps steps (the host
// synchronisation rule of training_state.h); where execution is synchronous (the CPU) the read is
// a memory access and happens every step.
bool loss_scale_stuck(StepContext& ctx) {
  if (!ctx.reads_are_cheap) {
    if (++ctx.state.steps_since_scale_check < kStuckScaleCheckSteps) return false;
    ctx.state.steps_since_scale_check = 0;
  }
  return ctx.loss_scale->stuck(kStuckScaleSteps);
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

void throw_if_scale_stuck(const StepContext& ctx, const StepBatch& batch, StepPosition position) {
  if (ctx.loss_scale && ctx.loss_scale->stuck(kStuckScaleSteps))
    throw_stuck_scale(ctx, batch, position);
}

namespace {

// A data-parallel rank with no rows of this batch (a last batch smaller than the world): it adds
// zero gradients to the others' and applies the same update.
void empty_shard_step(StepContext& ctx) {
  if (!ctx.variables) ctx.variables = ctx.model.trainable_variables();
  if (ctx.variables->empty()) return;
  std::vector<Tensor> zero;
  zero.reserve(ctx.variables->size());
  for (const Tensor& v : *ctx.variables) zero.push_back(zeros_like(v));
  if (overlaps(ctx)) {
    // The same buckets in the same order as the ranks that run a backward pass.
    distributed::detail::OverlappedReducer& reducer = start_reducer(ctx);
    for (std::size_t i = 0; i < zero.size(); ++i) reducer.ready(i, zero[i]);
    reducer.finish();
  }
  StepGradients grads = ctx.loss_scale ? StepGradients{ctx.loss_scale->get_unscaled_gradients(zero)}
                                       : StepGradients{std::move(zero)};
  reduce_gradients(ctx, grads);
  optimizer_step(ctx, grads);
  // The ranks with rows throw the stuck-scale error at this step (the state is the same on all).
  if (ctx.loss_scale && loss_scale_stuck(ctx)) {
    throw Error("model '" + ctx.model.name() + "': the loss scale is stuck (" +
                std::to_string(kStuckScaleSteps) +
                " consecutive skipped steps at a scale that cannot go lower); the ranks with "
                "rows in this batch name the layer that produces the Inf/NaN");
  }
}

}  // namespace

void train_step(StepContext& ctx, const Tensor& x, const Tensor& y, StepPosition position) {
  if (ctx.data_parallel && x.dim(0) == 0) {
    empty_shard_step(ctx);
    return;
  }
  const StepBatch batch = to_step_device(ctx, x, y);
  // No variable changes before this step's backward: 16-bit weight copies need not be kept.
  const autograd::RecastScope recast;
  const Tensor y_pred = forward(ctx, batch.x);
  const Tensor loss = compute_loss(ctx, batch.y, y_pred);
  const bool stepped = !ctx.variables->empty();
  if (stepped) {
    const StepGradients grads = backward(ctx, loss);
    reduce_gradients(ctx, grads);
    optimizer_step(ctx, grads);
  }
  ctx.state.train_metrics.update(loss, batch.x.dim(0), batch.y, y_pred);
  if (!stepped || !ctx.loss_scale || !loss_scale_stuck(ctx)) return;
  throw_stuck_scale(ctx, batch, position);
}

}  // namespace mixprec::models
