// keras.callbacks.EarlyStopping: stops fit() when the monitored log has not improved for
// `patience` epochs.
//
//   model.fit(x, y, {.epochs = 100, .validation_split = 0.2,
//                    .callbacks = {mp::callbacks::EarlyStopping({.patience = 3,
//                                                                .restore_best_weights = true})}});
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/monitor.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;  // a change of at most this much is no improvement
  int patience = 0;        // epochs without improvement before stopping (>= 0)
  MonitorMode mode = MonitorMode::automatic;
  // Training stops when the monitored value does not beat it (in the mode's direction) within
  // `patience` epochs.
  std::optional<double> baseline;
  // At the end of training, set the weights of the best epoch (Keras: also when stopped early
  // or not, as long as a best epoch was seen).
  bool restore_best_weights = false;
  int start_from_epoch = 0;  // epochs before this index are not watched
  bool verbose = false;      // print "Epoch N: early stopping" when it stops
};

class EarlyStopping : public Callback {
 public:
  // ValueError for a negative patience or start_from_epoch, or a bad monitor/min_delta.
  explicit EarlyStopping(EarlyStoppingOptions options = {});

  // The epoch index at which it stopped training (0 when it did not).
  int stopped_epoch() const { return stopped_epoch_; }
  // The index of the best epoch seen (-1 before any).
  int best_epoch() const { return best_epoch_; }
  std::optional<double> best() const { return monitor_.best(); }

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;

 private:
  EarlyStoppingOptions options_;
  Monitor monitor_;
  int wait_ = 0;
  int stopped_epoch_ = 0;
  int best_epoch_ = -1;
  std::vector<Tensor> best_weights_;
  bool warned_missing_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
