// StepTimer (see step_timer.h).
#include "models/step_timer.h"

#include <utility>

#if MIXPREC_HAVE_CUDA
#include "backend/cuda/context.h"
#endif

namespace mixprec::models {

#if MIXPREC_HAVE_CUDA
// Timing events recorded on the compute stream: events[0] before the first step, events[i] after
// step i. Created as needed and reused across epochs.
struct StepTimer::GpuEvents {
  int index = 0;
  std::vector<cudaEvent_t> events;
  std::size_t recorded = 0;

  ~GpuEvents() {
    cuda::DeviceGuard guard(index);
    for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
  }
  void record() {
    cuda::StreamScope scope(Device::cuda(index));
    if (recorded == events.size()) {
      cudaEvent_t e = nullptr;
      cuda::check(cudaEventCreate(&e), "cudaEventCreate (step timer)");
      events.push_back(e);
    }
    cuda::check(cudaEventRecord(events[recorded], scope.stream()), "cudaEventRecord (step timer)");
    ++recorded;
  }
  std::vector<double> take() {
    std::vector<double> ms;
    if (recorded < 2) {
      recorded = 0;
      return ms;
    }
    cuda::DeviceGuard guard(index);
    cuda::check(cudaEventSynchronize(events[recorded - 1]), "waiting for the last step");
    for (std::size_t i = 1; i < recorded; ++i) {
      float elapsed = 0.0f;
      cuda::check(cudaEventElapsedTime(&elapsed, events[i - 1], events[i]),
                  "cudaEventElapsedTime (step timer)");
      ms.push_back(static_cast<double>(elapsed));
    }
    recorded = 0;
    return ms;
  }
};
#else
struct StepTimer::GpuEvents {  // a build without CUDA has no CUDA tensors: never used
  int index = 0;
  std::size_t recorded = 0;
  void record() {}
  std::vector<double> take() { return {}; }
};
#endif

StepTimer::StepTimer(Device device) : device_(device) {
  if (device.is_cuda()) {
    gpu_ = std::make_unique<GpuEvents>();
    gpu_->index = device.index;
  }
}

StepTimer::~StepTimer() = default;

void StepTimer::step_started() {
  if (gpu_) {
    if (gpu_->recorded == 0) gpu_->record();  // the start of the first step
  } else {
    started_ = std::chrono::steady_clock::now();
  }
}

void StepTimer::step_finished() {
  if (gpu_) {
    gpu_->record();
  } else {
    host_ms_.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
            .count());
  }
}

std::vector<double> StepTimer::take_times() {
  if (gpu_) return gpu_->take();
  return std::exchange(host_ms_, {});
}

}  // namespace mixprec::models
