// The quantity a callback watches (EarlyStopping, ReduceLROnPlateau, ModelCheckpoint): a log name
// and whether lower or higher is better.
#pragma once

#include <optional>
#include <string>

#include "mixprec/callbacks/callback.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

// automatic: max for names containing "acc" (accuracy, val_accuracy) or starting with
// "fmeasure", min otherwise (Keras's rule).
enum class MonitorMode { automatic, min, max };

// Tracks the best value of one log. improved() is true when `value` beats the best by more than
// min_delta (>= 0) in the mode's direction; a NaN never improves.
class Monitor {
 public:
  // ValueError for an empty name or a negative/NaN min_delta; `who` names the callback in errors.
  Monitor(std::string name, MonitorMode mode, double min_delta, const char* who);

  const std::string& name() const { return name_; }
  bool maximizes() const { return maximize_; }
  // The watched value in `logs`, or nothing (the caller warns once, as Keras does).
  std::optional<double> read(const Logs& logs) const;
  // "the monitored log 'val_los' is not available (the logs have: loss, accuracy, ...)": what the
  // caller's one warning says when read() finds nothing, listing the names it could watch.
  std::string missing_message(const Logs& logs) const;
  bool improved(double value) const;
  std::optional<double> best() const { return best_; }
  void set_best(std::optional<double> best) { best_ = best; }
  void reset() { best_.reset(); }

 private:
  std::string name_;
  bool maximize_ = false;
  double min_delta_ = 0.0;
  std::optional<double> best_;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
