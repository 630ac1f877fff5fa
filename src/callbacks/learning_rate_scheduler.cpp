// callbacks::LearningRateScheduler (include/mixprec/callbacks/learning_rate_scheduler.h).
#include "mixprec/callbacks/learning_rate_scheduler.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "mixprec/error.h"
#include "mixprec/models/model.h"

namespace mixprec::callbacks {

LearningRateScheduler::LearningRateScheduler(EpochSchedule schedule, bool verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) {
    throw ValueError(
        "LearningRateScheduler: the schedule is empty; pass a function "
        "(int epoch, double learning_rate) -> double");
  }
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs& logs) {
  (void)logs;
  optimizers::Optimizer optimizer = model().optimizer();
  if (optimizer.learning_rate_is_schedule()) {
    throw ValueError(
        "LearningRateScheduler: the optimizer's learning rate is already a per-step "
        "schedule; use a constant learning rate with this callback");
  }
  const double lr = schedule_(epoch, optimizer.learning_rate());
  if (!(std::isfinite(lr) && lr >= 0.0)) {
    throw ValueError("LearningRateScheduler: the schedule returned " + std::to_string(lr) +
                     " for epoch " + std::to_string(epoch) +
                     "; a learning rate must be finite and >= 0");
  }
  optimizer.set_learning_rate(lr);
  if (verbose_) {
    char text[96];
    std::snprintf(text, sizeof text, "Epoch %d: LearningRateScheduler setting learning rate to %g.",
                  epoch + 1, lr);
    std::cout << text << "\n";
  }
}

}  // namespace mixprec::callbacks
