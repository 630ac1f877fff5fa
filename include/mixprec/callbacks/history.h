// keras.callbacks.History: records every epoch's logs. fit() always adds one and returns its
// record; pass your own (by shared_ptr) to watch the record while training runs.
#pragma once

#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/models/training.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

class History : public Callback {
 public:
  // The epochs recorded since the last on_train_begin.
  const mixprec::History& history() const { return history_; }

  // Starts a new record (Keras: each fit() has its own History).
  void on_train_begin(const Logs& logs) override;
  // Appends an EpochLog: metrics in history.history and EpochLog::metrics; learning_rate,
  // loss_scale, skipped_steps and epoch_seconds in their EpochLog fields.
  void on_epoch_end(int epoch, const Logs& logs) override;
  // The step times of the epoch just recorded (fit() passes them after on_epoch_end).
  void set_step_times(std::vector<double> step_ms);

 private:
  mixprec::History history_;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
