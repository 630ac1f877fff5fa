// The training step in plain steps (issue 10 item 5): move the batch, forward, loss, backward,
// optimizer step, metrics, each a separate call on a StepContext that fit() (or one
// train_on_batch()) creates once. Internal; src/models/train_step.cpp.
//
//   StepContext step(model, state);                 // once per fit(): device, optimizer
//   for (batch : batches) train_step(step, batch.x, batch.y, {epoch, i + 1});
//
// train_step() is the composition of the pieces below; a caller that needs another order (a
// custom loop inside the library) calls them one by one:
//   const StepBatch b = to_step_device(step, x, y);
//   const Tensor y_pred = forward(step, b.x);
//   const Tensor loss = compute_loss(step, b.y, y_pred);
//   optimizer_step(step, backward(step, loss));
//   step.state.train_metrics.update(loss, b.y, y_pred);
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "mixprec/distributed/data_parallel.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/models/model.h"
#include "mixprec/tensor.h"
#include "models/training_state.h"

namespace mixprec::distributed::detail {
class OverlappedReducer;
}

namespace mixprec::models {

// What every step of one fit() (or of one train_on_batch()) shares, resolved once instead of per
// step. Holds references: the model and its compile() state outlive it.
struct StepContext {
  StepContext(const Model& model, TrainingState& state);

  const Model& model;
  TrainingState& state;
  // Where the model computes (model_device() when the context is made: an unbuilt Sequential
  // builds its variables on the default device, which is what that returns). Batches go there.
  Device device;
  // The compiled optimizer as a LossScaleOptimizer, or null without loss scaling.
  mixed_precision::LossScaleOptimizer* loss_scale = nullptr;
  // The device runs work as it is called (the CPU), so reading a value back costs nothing; where
  // it queues work (a GPU) a read waits for it (DeviceServices::execution).
  bool reads_are_cheap = true;
  // trainable_variables(), listed after the first forward (which builds an unbuilt Sequential) and
  // reused by every later step. Frozen layers are not in it, so they get no gradient.
  std::optional<std::vector<Tensor>> variables;
  // Data-parallel training (FitOptions::distribute): the gradients are reduced over the ranks
  // after backward(), each rank's weighted by shard_weight (its rows / the global batch's rows,
  // set by fit() before each step). Null: this process trains alone.
  const distributed::DataParallel* data_parallel = nullptr;
  double shard_weight = 1.0;
  // The communication thread of DataParallel::overlap, made by the first overlapped step.
  std::shared_ptr<distributed::detail::OverlappedReducer> reducer;
};

// What backward() returns: the gradients, and under loss scaling the LossScaleOptimizer's record
// of their unscale-and-check pass, which optimizer_step() hands back so that the verdict is reused.
struct StepGradients {
  std::vector<Tensor> plain;
  std::optional<mixed_precision::UnscaledGradients> unscaled;

  explicit StepGradients(std::vector<Tensor> grads) : plain(std::move(grads)) {}
  explicit StepGradients(mixed_precision::UnscaledGradients grads) : unscaled(std::move(grads)) {}
  const std::vector<Tensor>& list() const { return unscaled ? unscaled->gradients() : plain; }
};

struct StepBatch {
  Tensor x, y;
};

// x and y on ctx.device: the tensors themselves when they are there already (the prefetcher
// delivers fit()'s and evaluate()'s batches on the model's device), else one move each.
StepBatch to_step_device(const StepContext& ctx, const Tensor& x, const Tensor& y);

// The model on x with training = true. The first call of a context lists the trainable variables
// and runs the output-dtype check deferred for an unbuilt Sequential.
Tensor forward(StepContext& ctx, const Tensor& x);

// The batch loss as a float32 scalar (batch_loss, training_state.h).
Tensor compute_loss(const StepContext& ctx, const Tensor& y, const Tensor& y_pred);

// The gradients of ctx.variables (after forward()), in their order; undefined where a variable got
// none. With loss scaling: of the scaled loss, then unscaled (and checked for Inf/NaN). Under
// ctx.data_parallel with DataParallel::overlap (a CPU model, several ranks) the gradients come back
// already summed over the ranks, reduced during the backward pass (before the unscaling).
StepGradients backward(StepContext& ctx, const Tensor& loss);

// Under ctx.data_parallel: the gradients summed over the ranks, weighted by ctx.shard_weight, in
// place, unless backward() did it already, and the loss-scaling verdict agreed; otherwise
// nothing.
void reduce_gradients(StepContext& ctx, const StepGradients& grads);

// apply_gradients of the compiled optimizer (a LossScaleOptimizer skips a non-finite step); keeps
// the gradients when the TensorBoard callback asks for them (TrainingState::keep_last_gradients).
void optimizer_step(StepContext& ctx, const StepGradients& grads);

// Reads the loss-scale state (on a GPU: one wait) and throws train_step()'s stuck-scale error, with
// its diagnosis on `batch`, when kStuckScaleSteps consecutive steps were skipped at a scale that
// cannot go lower; nothing without loss scaling. For a caller that runs the step's GPU work
// another way and checks at its own cadence (GraphedTrainStep, graphed_step.h).
void throw_if_scale_stuck(const StepContext& ctx, const StepBatch& batch, StepPosition position);

// One optimisation step on (x, y), the pieces above in order (under data parallelism a shard of no
// rows contributes zero gradients and counts no samples), then the training metrics
// (state.train_metrics). Throws mixprec::Error (diagnose_non_finite) after kStuckScaleSteps
// consecutive skipped steps at a scale that cannot go lower.
void train_step(StepContext& ctx, const Tensor& x, const Tensor& y, StepPosition position);

}  // namespace mixprec::models
