// Per-step times of fit(), one path for every device through its events
// (backend/device_services.h). The timer records an event on the compute stream around each step
// and reads the intervals when the epoch ends (one wait for the last event; nothing per step).
//
// Where a step starts depends on how the device runs work. On a device that runs every call to
// completion (the CPU: events are host timestamps) a step is the host time of train_step, from
// step_started() to step_finished(). On a device that queues work (CUDA) train_step only queues
// it, so a step runs on the device from the end of the previous step's work to the end of its own:
// the timer records one event before the first step and one after each step, and a step's time
// then includes any wait for its batch's copy and any gap where the device idled waiting for the
// host to queue work: what the step really cost the run.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/device_services.h"
#include "mixprec/device.h"

namespace mixprec::models {

class StepTimer {
 public:
  // DeviceError for a device kind this build has no backend for.
  explicit StepTimer(Device device);
  // With `services` standing in for the device's (tests); it must outlive the timer.
  StepTimer(Device device, const DeviceServices& services);
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  void step_started();   // just before train_step
  void step_finished();  // just after it returns
  // The epoch's step times in milliseconds, in order (waits for the device's last step).
  std::vector<double> take_times();

 private:
  struct Step {
    std::size_t start = 0;  // indices into events_
    std::size_t end = 0;
  };
  std::size_t record();  // the next event, recorded on the compute stream; its index

  Device device_;
  const DeviceServices& services_;
  std::vector<Event> events_;  // created as needed and reused across epochs
  std::size_t recorded_ = 0;   // events_[0, recorded_) belong to this epoch
  std::size_t start_ = 0;      // the running step's start event
  bool started_ = false;       // step_started() was called and its step_finished() not yet
  std::vector<Step> steps_;
};

}  // namespace mixprec::models
