// callbacks::ReduceLROnPlateau (include/mixprec/callbacks/reduce_lr_on_plateau.h).
#include "mixprec/callbacks/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/models/model.h"

namespace mixprec::callbacks {

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : options_(std::move(options)),
      monitor_(options_.monitor, options_.mode, options_.min_delta, "ReduceLROnPlateau") {
  if (!(options_.factor > 0.0 && options_.factor < 1.0)) {
    throw ValueError(
        "ReduceLROnPlateau: factor must be in (0, 1) (the rate is multiplied by it), "
        "got " +
        std::to_string(options_.factor));
  }
  if (options_.patience < 0 || options_.cooldown < 0 || !(options_.min_lr >= 0.0)) {
    throw ValueError("ReduceLROnPlateau: patience, cooldown and min_lr must be >= 0, got " +
                     std::to_string(options_.patience) + ", " + std::to_string(options_.cooldown) +
                     " and " + std::to_string(options_.min_lr));
  }
}

void ReduceLROnPlateau::on_train_begin(const Logs& logs) {
  (void)logs;
  wait_ = 0;
  cooldown_left_ = 0;
  monitor_.reset();
}

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  const std::optional<double> value = monitor_.read(logs);
  if (!value) {
    if (!warned_missing_) {
      log(LogLevel::warning, "ReduceLROnPlateau: " + monitor_.missing_message(logs) + "; skipping");
      warned_missing_ = true;
    }
    return;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  if (monitor_.improved(*value)) {
    monitor_.set_best(*value);
    wait_ = 0;
    return;
  }
  if (cooldown_left_ > 0 || ++wait_ < options_.patience) return;
  optimizers::Optimizer optimizer = model().optimizer();
  const double old_lr = optimizer.learning_rate();
  if (old_lr <= options_.min_lr) return;
  if (optimizer.learning_rate_is_schedule()) {
    throw ValueError(
        "ReduceLROnPlateau: the optimizer's learning rate is a schedule, which "
        "already sets the rate at every step; use a constant learning rate or drop "
        "the callback");
  }
  const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
  optimizer.set_learning_rate(new_lr);
  if (options_.verbose) {
    char text[96];
    std::snprintf(text, sizeof text, "Epoch %d: ReduceLROnPlateau reducing learning rate to %g.",
                  epoch + 1, new_lr);
    std::cout << text << "\n";
  }
  cooldown_left_ = options_.cooldown;
  wait_ = 0;
}

}  // namespace mixprec::callbacks
