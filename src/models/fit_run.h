// Where a running fit() is, for training checkpoints: the epoch and batch, and the shuffling
// state that reproduces the current epoch's order. ModelImpl::fit_run points at it while fit()
// runs. A checkpoint taken through it and restored by a later fit() (before its first epoch)
// makes that fit() continue exactly where the first one stood.
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/data/dataset.h"
#include "mixprec/random.h"

namespace mixprec::models {

// The place to continue from: batch `step` (0-based) of epoch `epoch`, whose order the loader
// draws from `loader_state`.
struct ResumePoint {
  int epoch = 0;
  std::int64_t step = 0;
  GeneratorState loader_state;
};

struct FitRun {
  data::BatchLoader* loader = nullptr;
  int epoch = 0;           // the epoch being trained (0-based)
  std::int64_t step = 0;   // batches of it finished
  std::int64_t steps = 0;  // batches per epoch
  std::int64_t batch_size = 0;
  GeneratorState loader_state_before;  // the loader before this epoch's shuffle
  // Set by a checkpoint restore during on_train_begin; fit() starts there.
  std::optional<ResumePoint> resume;

  // The point after everything done so far: this epoch's next batch, or the next epoch when the
  // epoch is complete.
  ResumePoint next_point() const {
    if (step >= steps) return {epoch + 1, 0, loader->generator_state()};
    return {epoch, step, loader_state_before};
  }
};

}  // namespace mixprec::models
