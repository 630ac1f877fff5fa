// callbacks::ProgbarLogger (include/mixprec/callbacks/progbar_logger.h).
#include "mixprec/callbacks/progbar_logger.h"

#include <string>

namespace mixprec::callbacks {

ProgbarLogger::ProgbarLogger(ProgressBarOptions options) : bar_(options) {}

std::vector<ProgressValue> ProgbarLogger::shown_values(const Logs& logs) {
  std::vector<ProgressValue> values;
  for (const auto& [name, value] : logs) {
    if (name == log_names::loss_scale) {
      values.push_back({name, value, ValueFormat::count});
    } else if (name == log_names::skipped_steps) {
      if (value > 0) values.push_back({name, value, ValueFormat::count});
    } else if (!is_training_extra(name)) {
      values.push_back({name, value});
    }
  }
  return values;
}

void ProgbarLogger::on_train_begin(const Logs& logs) {
  (void)logs;
  in_fit_ = true;
}

void ProgbarLogger::on_train_end(const Logs& logs) {
  (void)logs;
  in_fit_ = false;
}

void ProgbarLogger::on_epoch_begin(int epoch, const Logs& logs) {
  (void)logs;
  bar_.start(params().steps,
             "Epoch " + std::to_string(epoch + 1) + "/" + std::to_string(params().epochs));
}

void ProgbarLogger::on_train_batch_end(std::int64_t batch, const Logs& logs) {
  // The logs are read (on a GPU: waited for) only when the bar redraws, at most ~10 times a second.
  if (bar_.due()) bar_.update(batch + 1, shown_values(logs));
}

void ProgbarLogger::on_epoch_end(int epoch, const Logs& logs) {
  (void)epoch;
  bar_.finish(shown_values(logs));
}

void ProgbarLogger::on_test_begin(const Logs& logs) {
  (void)logs;
  if (!in_fit_) bar_.start(params().steps);
}

void ProgbarLogger::on_test_batch_end(std::int64_t batch, const Logs& logs) {
  if (!in_fit_ && bar_.due()) bar_.update(batch + 1, shown_values(logs));
}

void ProgbarLogger::on_test_end(const Logs& logs) {
  if (!in_fit_) bar_.finish(shown_values(logs));
}

void ProgbarLogger::interrupt() { bar_.interrupt(); }

}  // namespace mixprec::callbacks
