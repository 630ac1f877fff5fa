// keras.callbacks.TensorBoard: event files that TensorBoard shows, written by a background thread
// (io::SummaryWriter) so that no training step waits on the disk.
//
//   model.fit(x, y, {.epochs = 20, .validation_split = 0.2,
//                    .callbacks = {mp::callbacks::TensorBoard({.log_dir = "logs/mixed",
//                                                              .histogram_freq = 1})}});
//   $ tensorboard --logdir logs
//
// As Keras: log_dir/train and log_dir/validation runs. Scalars per epoch, at step = epoch index:
// epoch_loss, epoch_<metric> (validation metrics in validation/ without "val_"), and in train/
// epoch_learning_rate, epoch_loss_scale, epoch_skipped_steps, epoch_step_ms,
// epoch_samples_per_s and epoch_seconds (not "epoch_epoch_seconds"). With update_freq = N, also
// batch_<metric> (and batch_loss_scale) every N batches at step = the optimizer's iteration. Every
// histogram_freq epochs, a histogram of every variable (tag "dense_1/kernel"), and with
// write_gradients of the last step's gradients, unscaled (tag "dense_1/kernel/gradient"; non-finite
// entries of a skipped step are left out).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>

#include "mixprec/callbacks/callback.h"

#pragma GCC visibility push(default)

namespace mixprec::io {
class SummaryWriter;
}

namespace mixprec::callbacks {

struct TensorBoardOptions {
  std::filesystem::path log_dir = "logs";
  int histogram_freq = 0;  // epochs between histograms (0: none)
  // "epoch", or N > 0: batch-level scalars every N batches as well.
  std::variant<std::string, std::int64_t> update_freq = std::string("epoch");
  bool write_gradients = false;  // histograms of the unscaled gradients (needs histogram_freq)
};

class TensorBoard : public Callback {
 public:
  // ValueError for an empty log_dir, a negative histogram_freq, a bad update_freq, or
  // write_gradients without histogram_freq.
  explicit TensorBoard(TensorBoardOptions options = {});
  ~TensorBoard() override;
  TensorBoard(const TensorBoard& other);  // copies the options; writers are per fit()
  TensorBoard& operator=(const TensorBoard&) = delete;

  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  void write_histograms(int epoch);
  io::SummaryWriter& validation_writer();

  TensorBoardOptions options_;
  std::int64_t every_batches_ = 0;
  std::int64_t batches_seen_ = 0;
  std::int64_t execution_begun_ = -1;  // the first batch of the running execution
  std::unique_ptr<io::SummaryWriter> train_;
  std::unique_ptr<io::SummaryWriter> validation_;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
