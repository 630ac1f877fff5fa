// keras.callbacks.BackupAndRestore: fault tolerance. During fit() it writes training checkpoints
// (io::save_checkpoint) into backup_dir; when fit() is called again with the same directory after
// an interruption (a crash, SIGKILL, a pre-empted machine), it restores the newest one in
// on_train_begin and fit() continues from that epoch and batch, with the same weights, optimizer
// slots, loss scale, learning rate, shuffling order and random state, so the finished run is bit
// for bit the run that was never interrupted (on the CPU).
//
//   model.fit(x, y, {.epochs = 20,
//                    .callbacks = {mp::callbacks::BackupAndRestore({.backup_dir = "backup"})}});
//
// Files: backup_dir/ckpt-<n>.safetensors with n increasing; each is written to a temporary file,
// fsync'ed and renamed into place, so the newest complete file is always loadable. Restoring tries
// the newest first and falls back to older ones only when a file is unreadable (IOError); a
// checkpoint that does not fit the model or the run (ValueError) is an error. When the directory
// holds checkpoints and none can be read, fit() stops with an IOError listing each file and why
// (a run that was asked to resume never starts over silently); `restart` starts a new run there
// instead, keeping the files. When fit() ends normally the directory's checkpoints are deleted
// (delete_checkpoint), as in Keras.
//
// Deleting (max_to_keep's rotation, delete_checkpoint) touches only checkpoints this run wrote or
// could read: a file it cannot read (a newer format, a damaged file, another program's) is never
// removed, so that nothing is lost that a newer mixprec or a repair could still restore.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/io/checkpoint.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

struct BackupAndRestoreOptions {
  std::filesystem::path backup_dir;  // created when missing
  // "epoch": at the end of every epoch; N > 0: every N training batches (counted across epochs).
  std::variant<std::string, std::int64_t> save_freq = std::string("epoch");
  bool delete_checkpoint = true;  // remove the checkpoints when fit() completes
  int max_to_keep = 2;            // newest checkpoints kept (>= 1)
  bool verbose = false;           // print "resuming from ..." and each backup
  // Start a new run even when backup_dir holds checkpoints (none is restored; the new ones are
  // numbered after them and the old ones are kept). The CLI's --restart.
  bool restart = false;
  LoadOptions load_options;  // for restoring (allow_nonfinite)
};

class BackupAndRestore : public Callback {
 public:
  // ValueError for an empty backup_dir, a bad save_freq or max_to_keep < 1.
  explicit BackupAndRestore(BackupAndRestoreOptions options);

  // What the last on_train_begin restored (nothing: it started from scratch).
  const std::optional<io::CheckpointInfo>& restored() const { return restored_; }
  const std::optional<std::filesystem::path>& restored_from() const { return restored_from_; }
  // The checkpoint files in backup_dir, oldest first.
  std::vector<std::filesystem::path> checkpoints() const;
  // Writes a checkpoint now (the next ckpt-<n>, then the rotation) and returns its path; on ranks
  // other than 0 of a data-parallel group it only keeps the numbering. For a caller that must
  // save outside the schedule (the end of training, a stop on a signal).
  std::filesystem::path backup_now();

  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  void backup();
  // Removes the oldest checkpoints beyond `keep`, skipping any this run neither wrote nor could
  // read.
  void remove_old(std::size_t keep);
  bool may_delete(const std::filesystem::path& p);

  BackupAndRestoreOptions options_;
  std::int64_t every_batches_ = 0;  // 0: every epoch
  std::int64_t batches_seen_ = 0;
  std::int64_t execution_begun_ = -1;  // the first batch of the running execution
  std::int64_t next_number_ = 1;
  std::optional<io::CheckpointInfo> restored_;
  std::optional<std::filesystem::path> restored_from_;
  std::set<std::filesystem::path> deletable_;  // written or read by this run
  std::set<std::filesystem::path> kept_;       // found unreadable (or left alone by restart)
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
