// StepTimer (see step_timer.h).
#include "models/step_timer.h"

#include "backend/backend.h"

namespace mixprec::models {

StepTimer::StepTimer(Device device) : StepTimer(device, *backend_for(device).services) {}

StepTimer::StepTimer(Device device, const DeviceServices& services)
    : device_(device), services_(services) {}

std::size_t StepTimer::record() {
  if (recorded_ == events_.size()) {
    events_.push_back(services_.create_event(device_, EventTiming::enabled));
  }
  services_.record_event(*events_[recorded_], Stream::compute);
  return recorded_++;
}

void StepTimer::step_started() {
  // A queued device's step begins where the previous step's work ends (the first one at the
  // event recorded here); a synchronous device's step begins now.
  const bool continues = services_.execution == Execution::queued && !steps_.empty();
  start_ = continues ? steps_.back().end : record();
  started_ = true;
}

void StepTimer::step_finished() {
  const std::size_t end = record();
  steps_.push_back({started_ ? start_ : end, end});
  started_ = false;
}

std::vector<double> StepTimer::take_times() {
  std::vector<double> ms;
  if (!steps_.empty()) {
    services_.synchronize_event(*events_[steps_.back().end]);
    ms.reserve(steps_.size());
    for (const Step& s : steps_) {
      ms.push_back(services_.elapsed_ms(*events_[s.start], *events_[s.end]));
    }
  }
  steps_.clear();
  recorded_ = 0;
  started_ = false;
  return ms;
}

}  // namespace mixprec::models
