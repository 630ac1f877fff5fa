// keras.callbacks.ModelCheckpoint: saves the model during fit(), at the end of every epoch or
// every N batches, optionally only when the monitored log improves.
//
//   mp::callbacks::ModelCheckpoint({.filepath =
//   "ckpt/model-{epoch:02d}-{val_loss:.3f}.safetensors",
//                                   .save_best_only = true, .max_to_keep = 3})
//
// save_weights_only: model.save_weights(path) (safetensors, loads with load_weights()).
// Otherwise a training checkpoint (io::save_checkpoint: weights, optimizer slots and iterations,
// loss-scale state, position in fit(), random state), loadable with io::load_checkpoint(). Every
// write is atomic: a crash leaves the previous file whole.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>

#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/monitor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

struct ModelCheckpointOptions {
  // Fields: {epoch} (1-based), {batch} (1-based, batch saves), any log: {val_loss:.4f}. Parent
  // directories are created.
  std::string filepath;
  std::string monitor = "val_loss";
  MonitorMode mode = MonitorMode::automatic;
  bool save_best_only = false;  // save only when `monitor` improves on the best so far
  bool save_weights_only = false;
  // "epoch": at the end of every epoch; N > 0: every N training batches (counted across epochs).
  std::variant<std::string, std::int64_t> save_freq = std::string("epoch");
  // Keep only the newest this many files written by this callback (older ones are deleted);
  // 0 keeps all.
  int max_to_keep = 0;
  // With save_best_only: the value the monitored log must beat first.
  std::optional<double> initial_value_threshold;
  bool verbose = false;  // print each save
};

class ModelCheckpoint : public Callback {
 public:
  // ValueError for an empty or malformed filepath, save_freq other than "epoch" or N > 0, or a
  // negative max_to_keep.
  explicit ModelCheckpoint(ModelCheckpointOptions options);

  // The files this callback has written and still keeps, oldest first.
  const std::deque<std::filesystem::path>& kept() const { return kept_; }
  std::optional<double> best() const { return monitor_.best(); }

  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  void save(int epoch, std::int64_t batch, const Logs& logs);

  ModelCheckpointOptions options_;
  Monitor monitor_;
  std::int64_t every_batches_ = 0;  // 0: every epoch
  std::int64_t batches_seen_ = 0;
  std::int64_t execution_begun_ = -1;  // the first batch of the running execution
  int epoch_ = 0;
  std::deque<std::filesystem::path> kept_;
  bool warned_missing_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
