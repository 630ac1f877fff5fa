// Where a running fit() is, for training checkpoints: the epoch and batch, and the shuffling
// state that reproduces the current epoch's order. ModelImpl::fit_run points at it while fit()
// runs. A checkpoint taken through it and restored by a later fit() (before its first epoch)
// makes that fit() continue exactly where the first one stood.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/data/dataset.h"
#include "mixprec/models/training.h"
#include "mixprec/random.h"

namespace mixprec::callbacks {
class History;
}

namespace mixprec::models {

// One running mean of an epoch's training metrics (the loss's or a metric's): sum and count.
struct NamedSums {
  std::string name;  // "loss", "accuracy", ...
  double count = 0.0;
  double total = 0.0;
};

// The training metrics of an epoch stopped inside it: what its remaining batches add to, so that
// the resumed epoch reports the values of the uninterrupted one.
struct EpochSums {
  std::vector<NamedSums> sums;      // MetricState::sums(): "loss" first, then compile order
  std::int64_t skipped_before = 0;  // the loss scale's skipped steps when the epoch began
};

// The place to continue from: batch `step` (0-based) of epoch `epoch`, whose order the loader
// draws from `loader_state`; and, from a checkpoint that keeps them, the run's record so far.
struct ResumePoint {
  int epoch = 0;
  std::int64_t step = 0;
  GeneratorState loader_state;
  // The epochs before `epoch` as fit()'s History recorded them (without their step times);
  // nullopt for a checkpoint written before checkpoints kept them.
  std::optional<std::vector<EpochLog>> history;
  // The epoch's running sums when `step` > 0. In a data-parallel run they are the group's (every
  // rank's shard summed): on resuming, rank 0 continues from them and the other ranks from zero,
  // so that the epoch's metrics across ranks are those of the uninterrupted run.
  std::optional<EpochSums> epoch_sums;
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

  // The run's record, for checkpoints: fit()'s own History; while on_epoch_end runs, the logs of
  // the epoch ending (that History is called last, after a callback that checkpoints there); and
  // the loss scale's skipped steps when this epoch began.
  const callbacks::History* history = nullptr;
  const callbacks::Logs::Values* ending_logs = nullptr;
  std::int64_t skipped_before = 0;

  // Set when this epoch's end begins (its on_epoch_end): from there a checkpoint continues with
  // the next epoch.
  bool epoch_ending = false;

  // Data-parallel: the running sums of every rank together, at batch `step` of epoch `epoch`,
  // gathered by a collective where every rank may checkpoint (io::detail::gather_running_sums),
  // for rank 0's checkpoint. A checkpoint at another point keeps no sums.
  struct GroupSums {
    int epoch = 0;
    std::int64_t step = 0;
    EpochSums sums;
  };
  std::optional<GroupSums> group_sums;

  // The point after everything done so far: this epoch's next batch; the end of this epoch when
  // its batches are done but its end has not begun (step == steps: a resumed fit() then ends it,
  // validation and on_epoch_end included, as the uninterrupted one did); or the next epoch.
  ResumePoint next_point() const {
    ResumePoint p;
    if (step >= steps && epoch_ending) {
      p.epoch = epoch + 1;
      p.loader_state = loader->generator_state();
    } else {
      p.epoch = epoch;
      p.step = step;
      p.loader_state = loader_state_before;
    }
    return p;
  }
};

}  // namespace mixprec::models
