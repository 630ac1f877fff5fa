// fit()'s training step replayed as a CUDA graph: GraphedTrainStep::run(x, y, position)
// does what train_step(ctx, x, y, position) does (train_step.h), but on a GPU, after kWarmupSteps
// eager steps of one shape, it captures the step once (cuda::Graph, include/mixprec/cuda_graph.h:
// its memory in a private pool of the caching allocator, so replays allocate nothing) and from
// then on copies each batch into the captured inputs and replays the graph: one launch instead of
// hundreds. On the CPU, run() is train_step() itself (bit-identical, nothing else happens).
//
// What the graph holds: forward, loss, backward (the loss scaling's unscale-and-check included)
// and the optimizer step with the loss-scale rule (skip, halving and growth happen on the GPU,
// inside the graph). What runs on the host after each replay, as train_step runs it: the metric
// and loss accumulation (MetricState::update on the graph's loss and predictions: a few enqueued
// kernels on device accumulators, no host wait; LossTracker rebinds its sum every step, which a
// graph could not replay), the optimizer's iteration count (+1), and the stuck-scale count.
//
// Per-step host values (core::ReplayParameters): the capture records the values the step's host
// code computes anew every step, and the captured kernels read them from a small device buffer:
// the optimizer's update constants (Adam's and AdamW's bias correction, a learning-rate
// schedule's rate, a rate set by a callback between steps; SlotOptimizer::step_constants) and the
// keys of the Dropout layers (one draw of the layer's generator per call). Before each replay the
// host recomputes them for that step with the eager step's own code (advance_host_state: the
// draws, then the count), and one small kernel writes them into the buffer ahead of the graph. So
// a replayed step gives the eager step's bits, and after N replays every generator and the
// iteration count are where N eager steps leave them (checkpoints resume exactly). After the
// capture, check_recorded_step redoes the step's host side from the states before it: every
// value must come out the same and the generators must end where the step left them, or the
// step is not replayed.
//
// The stuck-loss-scale check (kStuckScaleSteps in training_state.h): train_step counts steps in
// TrainingState::steps_since_scale_check and reads the device's state every kStuckScaleCheckSteps
// steps. A replayed step counts the same way, but the read waits for the GPU, so it is deferred to
// the next sync_execution(), where it takes the place of that call's wait: with steps_per_execution
// N the host still waits once per execution, and the error (if any) comes at the end of the
// execution in which the count came due, naming that execution's last batch (the state that
// decides it is the device's, counted inside the graph, so nothing is lost by reading it later).
// If sync_execution() is never called, run() reads it itself once the count reaches twice the
// cadence.
//
// Eager fallback, said once per reason at verbosity 2 (LogLevel::info, "CUDA graphs: ..."):
//  - for the rest of the fit: MIXPREC_CUDA_GRAPHS=0; data-parallel training (the gradients are
//    all-reduced by NCCL or MPI between backward and update, not captured here); an optimizer
//    whose step cannot be replayed (OptimizerImpl::graph_replay_obstacle: clipnorm or
//    global_clipnorm, which read the norms back); a step that draws host random numbers it does
//    not record (the attention's dropout of MultiHeadAttention or ops::attention; found by
//    check_recorded_step), or records more values than the buffer holds; a capture that failed
//    (the reason is CUDA's or the step's); invalidate(reason), e.g. from fit for a callback that
//    reads or writes the weights between the steps of an execution;
//  - for a step: a batch whose shape or dtype differs from the captured one (the last, smaller
//    batch of an epoch); TrainingState::keep_last_gradients (TensorBoard's write_gradients: the
//    gradients would be the graph's, overwritten by the next replay); no trainable variables;
//  - trainable variables whose storage moved: the graph is dropped and the step is captured again
//    after a new warm-up.
//
// A failed capture leaves no trace: the optimizer's iteration count and every generator are set
// back to their values before it, and the batch is trained by the eager step.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/replay_parameters.h"
#include "mixprec/cuda_graph.h"
#include "mixprec/random.h"
#include "mixprec/tensor.h"
#include "models/train_step.h"
#include "models/training_state.h"

namespace mixprec::optimizers::detail {
class OptimizerImpl;
}

namespace mixprec::models {

// A generator and its state at some point of the step.
struct GeneratorSnapshot {
  Generator* generator = nullptr;
  GeneratorState state;
};
bool same_state(const GeneratorState& a, const GeneratorState& b);

// After a capture (the host side of the step ran once, recording into `parameters`): empty when
// every replay can do what the eager step does, i.e. nothing failed to record, and the step's host
// side, redone from `before` (the generators) and `iterations` (the optimizer's count before the
// step), recomputes every recorded value bit for bit and leaves the generators in the `after`
// states (no draw it did not record); else why not. Leaves the generators in the `after` states
// and the count at iterations + 1, the recorded values the capture's.
std::string check_recorded_step(core::ReplayParameters& parameters,
                                const std::vector<GeneratorSnapshot>& before,
                                const std::vector<GeneratorSnapshot>& after,
                                optimizers::detail::OptimizerImpl& optimizer,
                                std::int64_t iterations);
// The host side of one replayed step, before its upload and launch: the recorded values
// recomputed for this step (the dropout draws advance their generators as the eager step's do;
// the update constants are those of the current count), then the optimizer's count advanced.
void advance_host_state(core::ReplayParameters& parameters,
                        optimizers::detail::OptimizerImpl& optimizer);

class GraphedTrainStep {
 public:
  static constexpr int kWarmupSteps = 2;

  // `verbose`: say each fallback reason once (fit passes verbosity 2). Holds a reference to `ctx`,
  // which outlives it.
  GraphedTrainStep(StepContext& ctx, bool verbose);
  // Waits for queued replays when a graph exists (its memory goes back to the shared cache).
  ~GraphedTrainStep();
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  // One training step on (x, y); see the top of this file.
  void run(const Tensor& x, const Tensor& y, StepPosition position);
  // The end of an execution (fit's steps_per_execution batches): on a GPU exactly one host wait,
  // the deferred stuck-scale check when due (it throws train_step's error) or else a
  // synchronisation of the device. On the CPU nothing.
  void sync_execution();
  // Eager for the rest of this object's life, said once with `reason` at verbosity 2.
  void invalidate(std::string reason);

  // For tests and statistics.
  bool graphed() const { return graph_.captured(); }
  std::int64_t replays() const { return replays_; }
  std::int64_t eager_steps() const { return eager_steps_; }
  std::int64_t captures() const { return captures_; }
  // The reasons given so far (empty when every step since warm-up was replayed).
  const std::vector<std::string>& reasons() const { return reasons_; }
  const cuda::Graph& graph() const { return graph_; }

 private:
  struct Signature {
    Shape x_shape, y_shape;
    DType x_dtype = DType::float32, y_dtype = DType::float32;
    bool operator==(const Signature&) const = default;
  };

  void eager(const Tensor& x, const Tensor& y, StepPosition position);
  void say(const std::string& reason);
  void drop_graph();
  // Captures the step on (x, y) and replays it once; false (eager from now on) when that failed,
  // with the step's host effects undone.
  bool capture(const Tensor& x, const Tensor& y, StepPosition position);
  void replay(const Tensor& x, const Tensor& y, StepPosition position, bool advance_iterations);
  void check_stuck_scale_now();
  std::vector<GeneratorSnapshot> generators() const;
  std::vector<const void*> variable_addresses() const;
  // Whether a trainable variable's storage is not where the capture saw it (addresses_).
  bool variables_moved() const;

  StepContext& ctx_;
  bool verbose_;
  std::string permanent_;  // non-empty: eager for good, and why
  std::set<std::string> said_;
  std::vector<std::string> reasons_;

  Signature warm_signature_;
  int warm_steps_ = 0;

  // The captured step: inputs first, so that the graph (which reads them) goes first.
  Tensor static_x_, static_y_;
  Tensor loss_, y_pred_;  // outputs of the captured step (the graph's pool), read after replays
  Signature signature_;
  std::vector<const void*> addresses_;
  // The per-step values the graph reads (declared before it: it reads them on every replay).
  Tensor parameters_buffer_;
  std::unique_ptr<core::ReplayParameters> parameters_;
  cuda::Graph graph_;

  bool stuck_check_due_ = false;
  StepPosition last_position_;
  std::int64_t replays_ = 0, eager_steps_ = 0, captures_ = 0;
};

}  // namespace mixprec::models
