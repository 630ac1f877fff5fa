// The training loop's state (ModelImpl::training, set by compile()) and the pieces that
// fit(), evaluate(), predict() and train_on_batch() share (src/models/training.cpp, fit.cpp,
// evaluate.cpp, train_step.cpp, nonfinite_diagnosis.cpp). The step itself: train_step.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/data/dataset.h"
#include "mixprec/losses.h"
#include "mixprec/metrics.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/models/model.h"
#include "mixprec/models/training.h"
#include "mixprec/ops.h"
#include "mixprec/optimizers/optimizer.h"
#include "models/fit_run.h"
#include "models/model_impl.h"

namespace mixprec::models {

// DESIGN §2.5: when a loss scale that cannot go lower (a dynamic scale at 1, or a fixed scale)
// sees this many consecutive steps skipped for non-finite gradients, training makes no progress;
// fit()/train_on_batch() then throw, naming the layer that produced the Inf/NaN. 100 steps leaves
// room for a burst of bad batches yet stops a doomed run early.
inline constexpr std::int64_t kStuckScaleSteps = 100;

// How often train_step reads the loss-scale state back from a GPU for the stuck-scale check: every
// step on the CPU (a plain memory read), every kStuckScaleCheckSteps steps on CUDA (each read
// waits for the GPU to finish the queued steps; every 50 steps that costs well under 1%).
inline constexpr std::int64_t kStuckScaleCheckSteps = 50;

// The batch-size-weighted mean of the batch losses (Keras's loss tracker): sum(loss_b * n_b) /
// sum(n_b), so an epoch's loss is the mean over samples even when the last batch is smaller.
//
// Host synchronisation rule of the training loop: on a CUDA device nothing per step reads a value
// back to the host. The loss is summed into a float64 device scalar here (the batch size is a
// host number), the metrics count on the device (src/metrics/metric_impl.h), the loss-scale
// state is read every kStuckScaleCheckSteps steps, and the progress output reads values only when
// it redraws (at most ~10 times a second) and at the end of an epoch. The same code runs on the
// CPU, where each of those reads is a plain memory access.
struct LossTracker {
  double count = 0.0;
  Tensor total;  // float64 scalar on the losses' device, undefined until the first batch

  // Stream-ordered on a GPU: (loss as float64) * batch added to the running sum on the device.
  void add(const Tensor& loss, std::int64_t batch) {
    count += static_cast<double>(batch);
    const Tensor weighted = mul(loss.to(DType::float64), static_cast<double>(batch));
    // A sum restored from a checkpoint is on the CPU: it follows the batches to their device.
    if (total.defined() && !(total.device() == weighted.device()))
      total = total.to(weighted.device());
    total = total.defined() ? mixprec::add(total, weighted) : weighted;
  }
  // Reads the sum (on a GPU: waits for it).
  double result() const { return count <= 0.0 || !total.defined() ? 0.0 : total.item() / count; }
  void reset() {
    count = 0.0;
    total = Tensor();
  }
};

// The running loss and metrics of one kind of pass. fit()'s training batches (and
// train_on_batch()) count into TrainingState::train_metrics, evaluate() (fit()'s validation
// included) into TrainingState::test_metrics: each pass resets and fills only its own, so a
// validation pass at the end of an epoch leaves the epoch's training values as they were.
struct MetricState {
  LossTracker loss;
  std::vector<metrics::Metric> metrics;  // compile order

  void reset();
  // One batch of `samples` samples: `loss` (the batch mean, a float32 scalar) weighted by them, and
  // (y, y_pred) into every metric, recording no autograd graph.
  void update(const Tensor& loss, std::int64_t samples, const Tensor& y, const Tensor& y_pred);
  // "loss" then each metric, in compile order (reads device accumulators: a GPU sync).
  std::vector<std::pair<std::string, double>> results() const;

  // The running sums by name, "loss" then each metric in compile order (a GPU sync), for a
  // checkpoint taken inside an epoch; and set again from them (names and order as sums() gives
  // them: the caller checks).
  std::vector<NamedSums> sums() const;
  void set_sums(const std::vector<NamedSums>& sums);
};

struct TrainingState {
  // What compile() was given, as given (loss and metric names stay names), for the saved compile
  // settings (compile_config_to_json, include/mixprec/models/model_config.h).
  CompileOptions options;
  optimizers::Optimizer optimizer;  // as installed: wrapped under mixed_float16
  // The same optimizer seen as a LossScaleOptimizer, when it is one (loss scaling on).
  std::optional<mixed_precision::LossScaleOptimizer> loss_scale;
  losses::Loss loss;
  // fit()'s training epochs and train_on_batch(): the Metric objects compile() was given (so a
  // caller's own handle reads the training value), and the metrics it made from names.
  MetricState train_metrics;
  // evaluate() and fit()'s validation: metrics of the same kinds and names with their own state.
  MetricState test_metrics;
  bool mixed_policy = false;     // the model or one of its layers uses a mixed_* policy
  bool outputs_checked = false;  // the output-dtype warning ran (deferred when unbuilt)
  // A device that queues work: steps since the loss-scale state was last read back
  // (kStuckScaleCheckSteps).
  std::int64_t steps_since_scale_check = 0;
  // When set (the TensorBoard callback's write_gradients), train_step keeps the gradients of its
  // last step, unscaled, in trainable_variables() order (undefined where a variable got none).
  bool keep_last_gradients = false;
  std::vector<Tensor> last_gradients;
};

// Where a step is, for error messages; epoch 0 means train_on_batch().
struct StepPosition {
  int epoch = 0;
  std::int64_t step = 0;
};

// ValueError naming the model and `what` ("fit") when compile() has not run.
TrainingState& require_compiled(const Model& model, const char* what);

// Where the model computes: the device of its variables (all on one), else the default device.
// Batches come from CPU datasets and are moved there once (by the prefetcher, or by
// to_step_device in train_step.h).
Device model_device(const Model& model);

// Verbosity::automatic -> progress_bar when stdout is a terminal, else one_line_per_epoch.
Verbosity resolve_verbosity(Verbosity verbose);
// The progress output for `verbose` (resolved): a bar, a line per pass, or none when silent.
std::optional<callbacks::ProgressBar> make_progress(Verbosity verbose);

// Warns once per model output that is not float32 when the model uses a mixed policy (needs the
// graph; a Sequential built on its first call is checked at its first training step).
void check_output_dtypes(const Model& model, TrainingState& state);

// The loss of one batch as a float32 scalar (a custom loss may return a 16-bit or (1,) value;
// anything with more than one element is a ValueError).
Tensor batch_loss(const TrainingState& state, const Tensor& y, const Tensor& y_pred);

// ValueError (one line, naming both shapes) unless x and y are defined, have a sample axis and
// the same number of samples > 0. `what`: "fit", "evaluate", ...
void check_samples(const Tensor& x, const Tensor& y, const char* what);

class CallbackList;
// evaluate() on `data` with the callbacks' test hooks (fit()'s validation passes fit's list), in
// state.test_metrics. With `data_parallel`: this rank's shard of every batch, and the scores over
// every rank's samples (a collective; the batch-end logs are this rank's own running values).
Scores evaluate_with_callbacks(Model& model, TrainingState& state, const data::Pipeline& data,
                               std::int64_t batch_size, CallbackList& callbacks,
                               const distributed::DataParallel* data_parallel = nullptr);

// The stuck-scale error's diagnosis on the offending batch: runs the model layer by layer and
// names the first layer whose output has Inf/NaN; when every output is finite, the place where
// the backward pass first turns non-finite (the loss, or a layer and its variable). Returns the
// message of the error; does not throw.
std::string diagnose_non_finite(const Model& model, TrainingState& state, const Tensor& x,
                                const Tensor& y);

}  // namespace mixprec::models
