// The callbacks `mixprec train` and `compare` add to fit() to keep and watch a run (issue 11):
//
//   --tensorboard DIR [--histogram-freq N]   callbacks::TensorBoard: DIR/train, DIR/validation
//                                            (compare gives each policy DIR/<policy>)
//   --checkpoint-dir DIR [--save-freq N]     callbacks::BackupAndRestore in DIR, every epoch or
//                                            every N batches, checkpoints kept after the run
//
// Resuming is Keras's BackupAndRestore: the same command run again restores the newest loadable
// checkpoint in DIR and fit() continues from its epoch and batch (bit for bit the run that was
// never interrupted, on the CPU). The run prints one line when it resumes, and one saying the run
// is complete when the newest checkpoint is at the end of training (then nothing is trained and
// the restored model is evaluated and saved as usual). Unlike Keras the checkpoints are not
// deleted when fit() ends: a final one at the end of training is what tells a rerun that the run
// is complete, and it holds the trained weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::cli {

struct KeepOptions {
  std::string tensorboard_dir;  // "" = no TensorBoard
  int histogram_freq = 0;
  std::string checkpoint_dir;    // "" = no checkpoints
  std::int64_t save_freq = 0;    // 0 = every epoch, else every N batches
  bool restart = false;          // --restart: a new run even when the directory holds checkpoints
  bool allow_nonfinite = false;  // --allow-nonfinite
  bool stop_on_signal = false;   // train: SIGINT/SIGTERM stop fit() after the step (stop_signal.h)
};

// The newest checkpoint in `dir` (BackupAndRestore's ckpt-<n> names), nothing when there is none.
std::optional<std::filesystem::path> newest_checkpoint(const std::string& dir);

// The callbacks for `options`, in the order fit() must call them (the restore first, so that
// TensorBoard sees the restored model). Empty when nothing was asked for.
std::vector<callbacks::CallbackRef> make_run_callbacks(const KeepOptions& options);

}  // namespace mixprec::cli
