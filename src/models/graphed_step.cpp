// GraphedTrainStep (graphed_step.h): fit()'s training step captured once as a CUDA graph and
// replayed, with the eager train_step() wherever a replay would not do exactly what it does.
#include "models/graphed_step.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <utility>

#include "autograd/saved_cast.h"
#include "mixprec/creation.h"
#include "mixprec/cuda.h"
#include "mixprec/logging.h"
#include "models/model_impl.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec::models {

namespace {

// MIXPREC_CUDA_GRAPHS=0 turns capture off (anything else, or unset: on).
bool graphs_disabled_by_environment() {
  const char* env = std::getenv("MIXPREC_CUDA_GRAPHS");
  return env != nullptr && std::strcmp(env, "0") == 0;
}

// Every layer that owns a generator, nested models included (as a checkpoint collects them).
void collect_generators(const layers::Layer& layer, std::vector<Generator*>& out) {
  if (Generator* g = layer.impl().own_generator()) out.push_back(g);
  if (const auto* m = dynamic_cast<const ModelImpl*>(&layer.impl())) {
    for (const layers::Layer& l : m->layers()) collect_generators(l, out);
  }
}

optimizers::detail::OptimizerImpl& optimizer_impl(const StepContext& ctx) {
  return *ctx.state.optimizer.impl();
}

}  // namespace

bool same_state(const GeneratorState& a, const GeneratorState& b) {
  return a.words == b.words && a.has_spare == b.has_spare &&
         std::memcmp(&a.spare, &b.spare, sizeof a.spare) == 0;
}

std::string check_recorded_step(core::ReplayParameters& parameters,
                                const std::vector<GeneratorSnapshot>& before,
                                const std::vector<GeneratorSnapshot>& after,
                                optimizers::detail::OptimizerImpl& optimizer,
                                std::int64_t iterations) {
  if (!parameters.failure().empty()) return parameters.failure();
  for (Generator* g : parameters.generators()) {
    const auto known = [g](const GeneratorSnapshot& s) { return s.generator == g; };
    if (std::find_if(before.begin(), before.end(), known) == before.end()) {
      return "the step draws from a generator that is not the model's nor the default one";
    }
  }
  // The step again, host side only: from the generators and the count before it, every value
  // recomputed in the order recorded must be the one the step used, and the generators must end
  // where the step left them (no draw the step did not record).
  const std::vector<std::uint64_t> captured = parameters.words();
  for (const GeneratorSnapshot& g : before) g.generator->set_state(g.state);
  optimizer.set_iterations(iterations);
  parameters.refresh();
  optimizer.set_iterations(iterations + 1);
  bool generators_agree = before.size() == after.size();
  for (std::size_t i = 0; generators_agree && i < after.size(); ++i) {
    generators_agree = before[i].generator == after[i].generator &&
                       same_state(before[i].generator->state(), after[i].state);
  }
  // Whatever happens next, the generators are left where the step left them.
  for (const GeneratorSnapshot& g : after) g.generator->set_state(g.state);
  if (!generators_agree) {
    return "the step draws random numbers on the host that it does not record (e.g. attention "
           "dropout): every replay would repeat the capture's";
  }
  if (parameters.words() != captured) {
    return "a per-step value of the step is not recomputed exactly (its replays would differ "
           "from eager steps)";
  }
  return {};
}

void advance_host_state(core::ReplayParameters& parameters,
                        optimizers::detail::OptimizerImpl& optimizer) {
  parameters.refresh();  // the count still the one before this step, as the eager step sees it
  optimizer.set_iterations(optimizer.iterations() + 1);
}

GraphedTrainStep::GraphedTrainStep(StepContext& ctx, bool verbose) : ctx_(ctx), verbose_(verbose) {
  // The CPU runs train_step itself: nothing to fall back from, nothing said.
  if (!ctx_.device.is_cuda()) {
    permanent_ = "the model is not on a CUDA device";
  } else if (graphs_disabled_by_environment()) {
    invalidate("MIXPREC_CUDA_GRAPHS=0");
  }
}

GraphedTrainStep::~GraphedTrainStep() = default;

void GraphedTrainStep::say(const std::string& reason) {
  if (!said_.insert(reason).second) return;
  reasons_.push_back(reason);
  if (verbose_) {
    log(LogLevel::info, "CUDA graphs: model '" + ctx_.model.name() +
                            "': running the training step eagerly: " + reason);
  }
}

void GraphedTrainStep::invalidate(std::string reason) {
  if (!permanent_.empty()) return;
  say(reason);
  permanent_ = std::move(reason);
  // The graph is kept until destruction (tensors of its pool may still be read); never replayed.
}

void GraphedTrainStep::eager(const Tensor& x, const Tensor& y, StepPosition position) {
  ++eager_steps_;
  train_step(ctx_, x, y, position);
  // train_step counted the step toward the stuck-scale check and read the state when it came due.
  if (ctx_.state.steps_since_scale_check < kStuckScaleCheckSteps) stuck_check_due_ = false;
}

void GraphedTrainStep::drop_graph() {
  graph_ = cuda::Graph();  // waits for its replays, then its pool joins the shared cache
  loss_ = Tensor();
  y_pred_ = Tensor();
  static_x_ = Tensor();
  static_y_ = Tensor();
  parameters_.reset();
  parameters_buffer_ = Tensor();
  warm_steps_ = 0;
}

std::vector<GeneratorSnapshot> GraphedTrainStep::generators() const {
  std::vector<Generator*> gens{&default_generator()};
  collect_generators(ctx_.model, gens);
  std::vector<GeneratorSnapshot> out;
  for (Generator* g : gens) out.push_back({g, g->state()});
  return out;
}

std::vector<const void*> GraphedTrainStep::variable_addresses() const {
  std::vector<const void*> out;
  if (!ctx_.variables) return out;
  for (const Tensor& v : *ctx_.variables) out.push_back(v.data_ptr());
  return out;
}

bool GraphedTrainStep::variables_moved() const {
  // Every replay asks: compared in place, without building the list.
  if (!ctx_.variables) return !addresses_.empty();
  const std::vector<Tensor>& vars = *ctx_.variables;
  if (vars.size() != addresses_.size()) return true;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].data_ptr() != addresses_[i]) return true;
  }
  return false;
}

void GraphedTrainStep::run(const Tensor& x, const Tensor& y, StepPosition position) {
  if (!permanent_.empty()) return eager(x, y, position);
  if (ctx_.data_parallel != nullptr) {
    invalidate("data-parallel training all-reduces the gradients inside the step (not captured)");
    return eager(x, y, position);
  }
  if (ctx_.state.keep_last_gradients) {
    say("the TensorBoard callback keeps the last gradients (write_gradients)");
    return eager(x, y, position);
  }
  // Before the first step the variables are not listed yet (an unbuilt Sequential builds then).
  if (ctx_.variables && ctx_.variables->empty()) {
    say("the model has no trainable variables");
    return eager(x, y, position);
  }
  const Signature signature{x.shape(), y.shape(), x.dtype(), y.dtype()};
  if (graph_.captured()) {
    if (!(signature == signature_)) {
      say("a batch of another shape than the captured one (" + x.shape().to_string() + " vs " +
          signature_.x_shape.to_string() + ", e.g. the last batch of an epoch)");
      return eager(x, y, position);
    }
    if (variables_moved()) {
      say("a trainable variable's storage moved since the capture: captured again after a "
          "warm-up");
      drop_graph();
    } else {
      return replay(x, y, position, true);
    }
  }
  // Warm-up: eager steps of one shape create the optimizer's slots, the cuBLASLt plans, the cuDNN
  // algorithms and the cached blocks, none of which a capture could create.
  if (!(signature == warm_signature_)) {
    warm_signature_ = signature;
    warm_steps_ = 0;
  }
  if (warm_steps_ < kWarmupSteps || !ctx_.variables) {
    eager(x, y, position);
    ++warm_steps_;
    return;
  }
  if (const std::string why = optimizer_impl(ctx_).graph_replay_obstacle(); !why.empty()) {
    invalidate(why);
    return eager(x, y, position);
  }
  if (!capture(x, y, position)) eager(x, y, position);
}

bool GraphedTrainStep::capture(const Tensor& x, const Tensor& y, StepPosition position) {
  optimizers::detail::OptimizerImpl& optimizer = optimizer_impl(ctx_);
  const std::int64_t iterations = optimizer.iterations();
  const std::vector<GeneratorSnapshot> before = generators();
  // The captured inputs: tensors of the shared cache, allocated before the capture and kept as
  // long as the graph (it reads them on every replay).
  static_x_ = empty(x.shape(), {.dtype = x.dtype(), .device = ctx_.device});
  static_y_ = empty(y.shape(), {.dtype = y.dtype(), .device = ctx_.device});
  cuda::copy_into(static_x_, x);
  cuda::copy_into(static_y_, y);
  // The per-step values (update constants, dropout keys): recorded by the step's host code while
  // it is captured, rewritten before each replay.
  parameters_buffer_ =
      zeros({core::ReplayParameters::kWords}, {.dtype = DType::int64, .device = ctx_.device});
  parameters_ = std::make_unique<core::ReplayParameters>(parameters_buffer_);
  const auto undo = [&] {
    optimizer.set_iterations(iterations);
    if (parameters_) parameters_->restore_generators();  // any generator the step drew from
    for (const GeneratorSnapshot& g : before) g.generator->set_state(g.state);
    graph_ = cuda::Graph();
    loss_ = y_pred_ = static_x_ = static_y_ = Tensor();
    parameters_.reset();
    parameters_buffer_ = Tensor();
  };
  ++captures_;
  try {
    graph_ = cuda::Graph::capture(ctx_.device, [this] {
      const core::ReplayRecording recording(*parameters_);
      // train_step's pieces on the captured inputs (no data parallelism here, so
      // reduce_gradients has nothing to do); the metrics are updated after each replay.
      const autograd::RecastScope recast;
      Tensor y_pred = forward(ctx_, static_x_);
      Tensor loss = compute_loss(ctx_, static_y_, y_pred);
      const StepGradients grads = backward(ctx_, loss);
      optimizer_step(ctx_, grads);
      // Detached: the autograd graph of the capture is not kept alive with them.
      y_pred_ = y_pred.detach();
      loss_ = loss.detach();
    });
  } catch (const std::exception& e) {
    undo();
    invalidate(std::string("the capture failed: ") + e.what());
    return false;
  }
  if (optimizer.iterations() != iterations + 1) {
    undo();
    invalidate("the captured step did not count one optimizer iteration");
    return false;
  }
  // The optimizer step records its update constants (SlotOptimizer::step); without them a replay
  // would reuse the capture's (Adam's bias correction frozen).
  if (parameters_->values() == parameters_->draws()) {
    undo();
    invalidate("the optimizer step recorded no update constants for the replays");
    return false;
  }
  if (const std::string why =
          check_recorded_step(*parameters_, before, generators(), optimizer, iterations);
      !why.empty()) {
    undo();
    invalidate(why);
    return false;
  }
  signature_ = {x.shape(), y.shape(), x.dtype(), y.dtype()};
  addresses_ = variable_addresses();
  // The capture ran none of its GPU work: the first replay trains this batch (its iteration was
  // counted by the capture's host code). The inputs hold it already.
  replay(Tensor(), Tensor(), position, false);
  return true;
}

void GraphedTrainStep::replay(const Tensor& x, const Tensor& y, StepPosition position,
                              bool advance_iterations) {
  if (x.defined()) {
    // Stream-ordered after the previous replay and its metric updates, which read the old batch.
    cuda::copy_into(static_x_, x);
    cuda::copy_into(static_y_, y);
  }
  if (advance_iterations) advance_host_state(*parameters_, optimizer_impl(ctx_));
  // This step's values, stream-ordered after the previous replay (which read the old ones).
  parameters_->upload();
  graph_.replay();
  ++replays_;
  // As train_step: the loss and the metrics of the batch, accumulated on the device.
  ctx_.state.train_metrics.update(loss_, static_x_.dim(0), static_y_, y_pred_);
  last_position_ = position;
  if (ctx_.loss_scale && ++ctx_.state.steps_since_scale_check >= kStuckScaleCheckSteps) {
    stuck_check_due_ = true;
    // A caller that never ends its executions still gets the check.
    if (ctx_.state.steps_since_scale_check >= 2 * kStuckScaleCheckSteps) check_stuck_scale_now();
  }
}

void GraphedTrainStep::check_stuck_scale_now() {
  stuck_check_due_ = false;
  ctx_.state.steps_since_scale_check = 0;
  throw_if_scale_stuck(ctx_, StepBatch{static_x_, static_y_}, last_position_);
}

void GraphedTrainStep::sync_execution() {
  if (ctx_.reads_are_cheap) return;
  if (stuck_check_due_ && graph_.captured()) {
    check_stuck_scale_now();  // its read is this execution's wait
    return;
  }
  cuda::synchronize(ctx_.device);
}

}  // namespace mixprec::models
