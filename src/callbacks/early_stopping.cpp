// callbacks::EarlyStopping (include/mixprec/callbacks/early_stopping.h).
#include "mixprec/callbacks/early_stopping.h"

#include <iostream>
#include <string>

#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/models/model.h"

namespace mixprec::callbacks {

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : options_(std::move(options)),
      monitor_(options_.monitor, options_.mode, options_.min_delta, "EarlyStopping") {
  if (options_.patience < 0 || options_.start_from_epoch < 0) {
    throw ValueError("EarlyStopping: patience and start_from_epoch must be >= 0, got " +
                     std::to_string(options_.patience) + " and " +
                     std::to_string(options_.start_from_epoch));
  }
}

void EarlyStopping::on_train_begin(const Logs& logs) {
  (void)logs;
  wait_ = 0;
  stopped_epoch_ = 0;
  best_epoch_ = -1;
  best_weights_.clear();
  monitor_.set_best(options_.baseline);
}

void EarlyStopping::on_epoch_end(int epoch, const Logs& logs) {
  const std::optional<double> value = monitor_.read(logs);
  if (!value) {
    if (!warned_missing_) {
      log(LogLevel::warning, "EarlyStopping: " + monitor_.missing_message(logs) +
                                 "; skipping (a validation metric needs validation data)");
      warned_missing_ = true;
    }
    return;
  }
  if (epoch < options_.start_from_epoch) return;
  ++wait_;
  if (monitor_.improved(*value)) {
    monitor_.set_best(*value);
    best_epoch_ = epoch;
    if (options_.restore_best_weights) best_weights_ = model().get_weights();
    // Keras: with a baseline, waiting restarts only once the baseline is beaten.
    wait_ = 0;
    return;
  }
  if (wait_ >= options_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model().set_stop_training(true);
  }
}

void EarlyStopping::on_train_end(const Logs& logs) {
  (void)logs;
  if (stopped_epoch_ > 0 && options_.verbose) {
    std::cout << "Epoch " << stopped_epoch_ + 1 << ": early stopping\n";
  }
  if (options_.restore_best_weights && !best_weights_.empty()) {
    if (options_.verbose) {
      std::cout << "Restoring model weights from the end of the best epoch: " << best_epoch_ + 1
                << ".\n";
    }
    model().set_weights(best_weights_);
  }
}

}  // namespace mixprec::callbacks
