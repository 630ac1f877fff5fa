// Per-step times of fit() on either device. On the CPU a step's time is the host wall time of
// train_step (the step has finished when it returns). On a CUDA device train_step only queues the
// work, so host time says little; there the timer records a CUDA event on the compute stream
// before the first step and after each step, and reads the intervals between them when the epoch
// ends (one wait for the last event; nothing per step). A step's GPU time then includes any wait
// for its batch's copy, and any gap where the GPU idled waiting for the host to queue work: what
// the step really cost the run.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "mixprec/device.h"

namespace mixprec::models {

class StepTimer {
 public:
  explicit StepTimer(Device device);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  void step_started();   // just before train_step
  void step_finished();  // just after it returns
  // The epoch's step times in milliseconds, in order (waits for the GPU's last step).
  std::vector<double> take_times();

 private:
  struct GpuEvents;
  Device device_;
  std::chrono::steady_clock::time_point started_;
  std::vector<double> host_ms_;
  std::unique_ptr<GpuEvents> gpu_;  // CUDA devices only
};

}  // namespace mixprec::models
