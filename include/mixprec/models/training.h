// Options and results of Model::compile / fit / evaluate / predict (Keras names and defaults).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/distributed/data_parallel.h"
#include "mixprec/losses.h"
#include "mixprec/metrics.h"
#include "mixprec/optimizers.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct CompileOptions {
  // Undefined: RMSprop(). Under a mixed_float16 model policy the optimizer is wrapped in a
  // dynamic LossScaleOptimizer automatically (unless it already is one), DESIGN §2.5.
  optimizers::Optimizer optimizer;
  std::variant<std::string, losses::Loss> loss = std::string("sparse_categorical_crossentropy");
  // Names ("accuracy", "sparse_categorical_accuracy", ...) or Metric objects.
  std::vector<std::variant<std::string, metrics::Metric>> metrics;
  // Keras's steps_per_execution: fit(), evaluate() and predict() run this many batches per
  // execution. The batch-level callbacks (on_train_batch_begin/end, on_test_batch_begin/end,
  // on_predict_batch_begin/end) fire once per execution: begin with the index of its first batch,
  // end with the index of its last and the logs after it; the progress bar advances per
  // execution; an epoch whose batch count is not a multiple ends with a shorter execution.
  // ModelCheckpoint's and BackupAndRestore's save_freq and TensorBoard's update_freq count
  // batches, as in Keras. The training itself is the same for every value (the same steps in the
  // same order). On CUDA an execution replays captured CUDA graphs where it can, with one host
  // wait per execution. >= 1.
  std::int64_t steps_per_execution = 1;
};

// Keras verbosity: 0 silent, 1 progress bar, 2 one line per epoch; "auto" = 1 on a terminal, else
// 2. Written as Keras writes it (`.verbose = 0`, `.verbose = 2`, `.verbose = "auto"`) or by name
// (`.verbose = Verbosity::silent`). Any other number or name throws ValueError listing these.
class Verbosity {
 public:
  static const Verbosity silent;              // 0
  static const Verbosity progress_bar;        // 1
  static const Verbosity one_line_per_epoch;  // 2
  static const Verbosity automatic;           // "auto"

  constexpr Verbosity() = default;     // automatic
  Verbosity(int level);                // NOLINT: implicit, Keras's verbose=0/1/2
  Verbosity(const char* name);         // NOLINT: implicit, "auto" (or "0", "1", "2")
  Verbosity(const std::string& name);  // NOLINT

  // 0, 1, 2, or -1 for automatic.
  constexpr int level() const { return level_; }
  explicit constexpr operator int() const { return level_; }
  friend constexpr bool operator==(Verbosity a, Verbosity b) = default;

 private:
  struct Level {
    int value;
  };
  constexpr explicit Verbosity(Level level) : level_(level.value) {}
  int level_ = -1;
};
inline constexpr Verbosity Verbosity::silent{Level{0}};
inline constexpr Verbosity Verbosity::progress_bar{Level{1}};
inline constexpr Verbosity Verbosity::one_line_per_epoch{Level{2}};
inline constexpr Verbosity Verbosity::automatic{Level{-1}};

// fit()'s validation data: (x_val, y_val) tensors, or a data::Pipeline (Keras takes a tuple or a
// tf.data dataset), evaluated with fit's batch_size.
using ValidationData = std::variant<std::pair<Tensor, Tensor>, data::Pipeline>;

struct FitOptions {
  std::int64_t batch_size = 32;  // the last batch of an epoch may be smaller (as Keras)
  int epochs = 1;
  Verbosity verbose = Verbosity::automatic;
  // The last fraction of x/y (of a Pipeline's dataset, keeping its steps), taken before
  // shuffling (as Keras).
  double validation_split = 0.0;
  // (x_val, y_val) or a Pipeline, evaluated at the end of every epoch; takes precedence over
  // validation_split (as Keras).
  std::optional<ValidationData> validation_data;
  bool shuffle = true;
  std::optional<std::uint64_t> seed;  // shuffling seed; default: drawn from default_generator()
  // Called around training, epochs and batches (include/mixprec/callbacks/*.h), in this order,
  // after the progress bar (unless verbose is silent) and before the History fit() returns.
  std::vector<callbacks::CallbackRef> callbacks;
  // The epoch index to start at (Keras): fit trains epochs initial_epoch .. epochs - 1, numbered
  // from initial_epoch + 1 in the progress output and History. 0 <= initial_epoch.
  int initial_epoch = 0;
  // Batches per epoch; default: every batch of the training data. At most the number of batches.
  std::optional<std::int64_t> steps_per_epoch;
  // Data-parallel training over the processes of the launcher (mpirun -np N), as Keras under a
  // distribution strategy: include/mixprec/distributed/data_parallel.h. batch_size is then the
  // GLOBAL batch: each of the N ranks computes on its shard of every batch (rows
  // [r*n/N, (r+1)*n/N)), so N ranks with batch_size B take the same steps as one process with B.
  // Unset: this process trains alone. In a group of one, set or not, the training is the same.
  std::optional<distributed::DataParallel> distribute;
};

struct EvaluateOptions {
  std::int64_t batch_size = 32;
  Verbosity verbose = Verbosity::automatic;
  // on_test_begin, on_test_batch_begin/end and on_test_end of each.
  std::vector<callbacks::CallbackRef> callbacks;
  // Data-parallel evaluation (data_parallel.h): each rank computes on its shard of every batch of
  // batch_size (the global batch) and the scores are over every rank's samples, the same on all.
  std::optional<distributed::DataParallel> distribute;
};

struct PredictOptions {
  std::int64_t batch_size = 32;
  Verbosity verbose = Verbosity::silent;
  // on_predict_begin, on_predict_batch_begin/end and on_predict_end of each.
  std::vector<callbacks::CallbackRef> callbacks;
};

// One epoch of fit(): every metric by name ("loss", "accuracy", "val_loss", "val_accuracy", ...),
// wall time, loss-scaling state at the end of the epoch, and the per-step times. Training metrics
// are over the whole epoch ("loss" is the mean over samples), validation ones over the validation
// set with the weights at the end of the epoch.
struct EpochLog {
  int epoch = 0;  // 1-based
  std::map<std::string, double> metrics;
  double seconds = 0.0;              // wall time of the epoch, validation included
  std::optional<double> loss_scale;  // set when the optimizer is a LossScaleOptimizer
  std::int64_t skipped_steps = 0;    // steps skipped in this epoch (non-finite gradients)
  // Time of each training step: forward, backward, update and metric updates; batch assembly
  // and progress output are not included. On the CPU the host wall time of the step; on a GPU the
  // GPU time between the ends of consecutive steps (CUDA events, read at the end of the epoch).
  std::vector<double> step_ms;
};

struct History {
  std::vector<EpochLog> epochs;
  // Keras's history.history: metric name -> one value per epoch (the metrics of EpochLog only;
  // loss scale and timings are in `epochs`).
  std::map<std::string, std::vector<double>> history;
};

// evaluate(): loss first, then metrics, in compile order; scores[0] is the loss as in Keras.
struct Scores {
  std::vector<std::pair<std::string, double>> values;
  double operator[](std::size_t i) const { return values.at(i).second; }
  double at(const std::string& name) const;  // ValueError listing the names when absent
};

}  // namespace mixprec

#pragma GCC visibility pop
