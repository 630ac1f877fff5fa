// keras.callbacks.ReduceLROnPlateau: multiplies the learning rate by `factor` when the monitored
// log has not improved for `patience` epochs. The optimizer's learning rate must be a constant
// (a schedule already decides the rate; a ValueError names the conflict at the first reduction).
#pragma once

#include <string>

#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/monitor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;  // in (0, 1)
  int patience = 10;    // epochs without improvement before a reduction (>= 0)
  MonitorMode mode = MonitorMode::automatic;
  double min_delta = 1e-4;  // a change of at most this much is no improvement
  int cooldown = 0;         // epochs after a reduction during which waiting is suspended
  double min_lr = 0.0;      // the rate never goes below this
  bool verbose = false;     // print each reduction
};

class ReduceLROnPlateau : public Callback {
 public:
  // ValueError for factor outside (0, 1), negative patience/cooldown/min_lr.
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});

  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  ReduceLROnPlateauOptions options_;
  Monitor monitor_;
  int wait_ = 0;
  int cooldown_left_ = 0;
  bool warned_missing_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
