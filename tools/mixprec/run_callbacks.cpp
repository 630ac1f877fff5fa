// The callbacks of --tensorboard and --checkpoint-dir (see run_callbacks.h).
#include "run_callbacks.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "mixprec/callbacks/backup_and_restore.h"
#include "mixprec/callbacks/tensorboard.h"
#include "mixprec/io/checkpoint.h"
#include "stop_signal.h"

namespace mixprec::cli {

namespace {

namespace fs = std::filesystem;

// Newest checkpoints kept in --checkpoint-dir: the one being written may be cut short by a crash
// (it is a temporary file until renamed, but the disk may still lose it), so keep one before it.
constexpr int kKeep = 2;

// Runs after BackupAndRestore: says what it restored (one line on stdout), and when fit() ends
// makes sure the newest checkpoint is the end of training, so that the same command run again
// finds the run complete (with --save-freq N the last backup may be a few batches before the end).
class ResumeReport : public callbacks::Callback {
 public:
  ResumeReport(std::shared_ptr<callbacks::BackupAndRestore> backup, fs::path dir)
      : backup_(std::move(backup)), dir_(std::move(dir)) {}

  void on_train_begin(const callbacks::Logs& logs) override {
    (void)logs;
    remove_stale_temporaries();
    const auto& info = backup_->restored();
    if (!info) return;
    const std::string file = backup_->restored_from()->string();
    if (info->epoch > params().epochs) {  // trained further by a command with more --epochs
      std::printf(
          "run in %s has trained %d epochs, more than --epochs %d (%s): nothing left to train\n",
          dir_.string().c_str(), info->epoch, params().epochs, file.c_str());
    } else if (info->epoch == params().epochs) {
      std::printf(
          "run in %s is complete (%d/%d epochs, %lld optimizer steps, %s): nothing left to train\n",
          dir_.string().c_str(), info->epoch, params().epochs,
          static_cast<long long>(info->iterations), file.c_str());
    } else {
      std::printf("resuming from %s: epoch %d/%d, step %lld/%lld (%lld optimizer steps done)\n",
                  file.c_str(), info->epoch + 1, params().epochs,
                  static_cast<long long>(info->step), static_cast<long long>(params().steps),
                  static_cast<long long>(info->iterations));
    }
    std::fflush(stdout);
  }

  void on_train_end(const callbacks::Logs& logs) override {
    (void)logs;
    const std::vector<fs::path> files = backup_->checkpoints();
    if (!files.empty()) {
      try {
        const io::CheckpointInfo newest = io::read_checkpoint_info(files.back());
        if (newest.in_fit && newest.epoch >= params().epochs) return;  // already the end
      } catch (const IOError&) {
        // Unreadable: write the final one after it.
      }
    }
    // Numbered after the newest and rotated by BackupAndRestore's rule (only checkpoints this
    // run wrote or could read are deleted).
    (void)backup_->backup_now();
  }

 private:
  // A process killed while writing a checkpoint leaves its temporary file behind
  // (".ckpt-<n>.safetensors.tmp-XXXXXX", the atomic write's name beside the target); nothing
  // reads those, and a run killed often would pile them up.
  void remove_stale_temporaries() const {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(".ckpt-", 0) == 0 && name.find(".safetensors.tmp-") != std::string::npos) {
        std::error_code ignored;
        fs::remove(entry.path(), ignored);
      }
    }
  }

  std::shared_ptr<callbacks::BackupAndRestore> backup_;
  fs::path dir_;
};

}  // namespace

std::vector<callbacks::CallbackRef> make_run_callbacks(const KeepOptions& options) {
  std::vector<callbacks::CallbackRef> list;
  if (!options.checkpoint_dir.empty()) {
    callbacks::BackupAndRestoreOptions backup_options{
        .backup_dir = options.checkpoint_dir,
        .delete_checkpoint = false,
        .max_to_keep = kKeep,
        .restart = options.restart,
        .load_options = {.allow_nonfinite = options.allow_nonfinite}};
    if (options.save_freq > 0) backup_options.save_freq = options.save_freq;
    auto backup = std::make_shared<callbacks::BackupAndRestore>(std::move(backup_options));
    list.emplace_back(backup);
    list.emplace_back(std::make_shared<ResumeReport>(backup, options.checkpoint_dir));
  }
  if (options.stop_on_signal) list.emplace_back(make_stop_on_signal());
  if (!options.tensorboard_dir.empty()) {
    list.emplace_back(callbacks::TensorBoard(
        {.log_dir = options.tensorboard_dir, .histogram_freq = options.histogram_freq}));
  }
  return list;
}

std::optional<std::filesystem::path> newest_checkpoint(const std::string& dir) {
  if (dir.empty()) return std::nullopt;
  const std::vector<fs::path> files =
      callbacks::BackupAndRestore({.backup_dir = dir}).checkpoints();
  if (files.empty()) return std::nullopt;
  return files.back();
}

}  // namespace mixprec::cli
