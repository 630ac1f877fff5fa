// callbacks::History (include/mixprec/callbacks/history.h).
#include "mixprec/callbacks/history.h"

#include <string>
#include <utility>

namespace mixprec::callbacks {

void History::on_train_begin(const Logs& logs) {
  (void)logs;
  history_ = mixprec::History();
}

void History::on_epoch_end(int epoch, const Logs& logs) {
  EpochLog log;
  log.epoch = epoch + 1;  // EpochLog counts from 1
  for (const auto& [name, value] : logs) {
    if (name == log_names::loss_scale) {
      log.loss_scale = value;
    } else if (name == log_names::skipped_steps) {
      log.skipped_steps = static_cast<std::int64_t>(value);
    } else if (name == log_names::epoch_seconds) {
      log.seconds = value;
    } else if (!is_training_extra(name)) {
      log.metrics[name] = value;
      history_.history[name].push_back(value);
    }
  }
  history_.epochs.push_back(std::move(log));
}

void History::set_step_times(std::vector<double> step_ms) {
  if (!history_.epochs.empty()) history_.epochs.back().step_ms = std::move(step_ms);
}

}  // namespace mixprec::callbacks
