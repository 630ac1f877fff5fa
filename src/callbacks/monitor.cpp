// callbacks::Monitor (include/mixprec/callbacks/monitor.h).
#include "mixprec/callbacks/monitor.h"

#include <cmath>
#include <utility>

#include "mixprec/error.h"

namespace mixprec::callbacks {

Monitor::Monitor(std::string name, MonitorMode mode, double min_delta, const char* who)
    : name_(std::move(name)), min_delta_(min_delta) {
  if (name_.empty()) {
    throw ValueError(std::string(who) + ": monitor must name a log (\"val_loss\", \"accuracy\")");
  }
  if (!(min_delta >= 0.0)) {
    throw ValueError(std::string(who) + ": min_delta must be >= 0, got " +
                     std::to_string(min_delta));
  }
  switch (mode) {
    case MonitorMode::min: maximize_ = false; break;
    case MonitorMode::max: maximize_ = true; break;
    case MonitorMode::automatic:
      maximize_ = name_.find("acc") != std::string::npos || name_.rfind("fmeasure", 0) == 0;
      break;
  }
}

std::optional<double> Monitor::read(const Logs& logs) const { return logs.get(name_); }

std::string Monitor::missing_message(const Logs& logs) const {
  std::string names;
  for (const auto& [name, value] : logs) {
    (void)value;
    names += (names.empty() ? "" : ", ") + name;
  }
  return "the monitored log '" + name_ +
         "' is not available (the logs have: " + (names.empty() ? std::string("none") : names) +
         ")";
}

bool Monitor::improved(double value) const {
  if (std::isnan(value)) return false;
  if (!best_) return true;
  return maximize_ ? value - min_delta_ > *best_ : value + min_delta_ < *best_;
}

}  // namespace mixprec::callbacks
