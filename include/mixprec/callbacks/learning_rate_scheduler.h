// keras.callbacks.LearningRateScheduler: sets the learning rate at the start of every epoch from
// schedule(epoch, current rate). (For a rate that changes every step, give the optimizer a
// schedule instead: include/mixprec/optimizers/schedules.h.)
#pragma once

#include <functional>

#include "mixprec/callbacks/callback.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

using EpochSchedule = std::function<double(int epoch, double learning_rate)>;

class LearningRateScheduler : public Callback {
 public:
  // ValueError for an empty schedule.
  explicit LearningRateScheduler(EpochSchedule schedule, bool verbose = false);

  // ValueError when the schedule returns a negative or non-finite rate, or the optimizer's rate is
  // a per-step schedule.
  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  EpochSchedule schedule_;
  bool verbose_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
