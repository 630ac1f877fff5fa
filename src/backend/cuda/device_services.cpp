// The cuda backend's DeviceServices table (backend/device_services.h): pinned (page-locked)
// staging, uploads with cudaMemcpyAsync on the GPU's copy stream, CUDA events on the compute and
// copy streams of backend/cuda/context.h, the caching allocator's statistics.
#include "backend/device_services.h"

#include <cuda_runtime_api.h>

#include <string>

#include "backend/cuda/allocator.h"
#include "backend/cuda/context.h"
#include "backend/cuda/host_waits.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

void free_staging(std::byte* data, std::size_t) noexcept {
  count_host_wait();  // cudaFreeHost synchronises the device
  (void)cudaFreeHost(data);
}

StagingBuffer allocate_staging(std::size_t bytes) {
  void* data = nullptr;
  // Portable: usable by every GPU's copies, whichever device is current.
  check(cudaHostAlloc(&data, bytes == 0 ? 1 : bytes, cudaHostAllocPortable),
        "cudaHostAlloc (pinned staging)");
  return StagingBuffer(static_cast<std::byte*>(data), bytes, &free_staging);
}

cudaStream_t stream_of(const DeviceContext& ctx, Stream stream) {
  return stream == Stream::copy ? ctx.copy : ctx.compute;
}

void upload(const StagingBuffer& src, std::size_t offset, Tensor& dst) {
  const std::size_t bytes = dst.nbytes();
  if (offset > src.size() || bytes > src.size() - offset) {
    throw ValueError("upload: " + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(offset) + " lie outside a staging buffer of " +
                     std::to_string(src.size()) + " bytes");
  }
  const int index = require_device(dst.device());
  if (bytes == 0) return;
  DeviceGuard guard(index);
  check(cudaMemcpyAsync(dst.data_ptr(), src.data() + offset, bytes, cudaMemcpyHostToDevice,
                        context(index).copy),
        "cudaMemcpyAsync (staged upload)");
}

class CudaEvent final : public EventState {
 public:
  CudaEvent(Device device, EventTiming timing)
      : EventState(device), index_(require_device(device)), timing_(timing) {
    DeviceGuard guard(index_);
    const unsigned flags =
        timing == EventTiming::enabled ? cudaEventDefault : cudaEventDisableTiming;
    check(cudaEventCreateWithFlags(&event_, flags), "cudaEventCreate");
  }
  ~CudaEvent() override {
    try {
      DeviceGuard guard(index_);
      // Legal while waits on it are pending: its resources go once it has completed.
      (void)cudaEventDestroy(event_);
    } catch (...) {  // a failing GPU at shutdown: nothing more can be done here
    }
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  int index() const { return index_; }
  cudaEvent_t event() const { return event_; }
  EventTiming timing() const { return timing_; }

 private:
  int index_;
  EventTiming timing_;
  cudaEvent_t event_ = nullptr;
};

const CudaEvent& cuda_event(const EventState& event) {
  if (!event.device().is_cuda()) {
    throw DeviceError("the cuda backend got an event of " + event.device().to_string());
  }
  return static_cast<const CudaEvent&>(event);
}

Event create_event(Device device, EventTiming timing) {
  return std::make_unique<CudaEvent>(device, timing);
}

void record_event(EventState& event, Stream stream) {
  const CudaEvent& e = cuda_event(event);
  DeviceGuard guard(e.index());
  check(cudaEventRecord(e.event(), stream_of(context(e.index()), stream)), "cudaEventRecord");
}

void wait_event(Stream waiter, const EventState& event) {
  const CudaEvent& e = cuda_event(event);
  DeviceGuard guard(e.index());
  check(cudaStreamWaitEvent(stream_of(context(e.index()), waiter), e.event(), 0),
        "cudaStreamWaitEvent");
}

void synchronize_event(const EventState& event) {
  const CudaEvent& e = cuda_event(event);
  DeviceGuard guard(e.index());
  count_host_wait();
  check(cudaEventSynchronize(e.event()), "cudaEventSynchronize");
}

bool event_completed(const EventState& event) {
  const CudaEvent& e = cuda_event(event);
  DeviceGuard guard(e.index());
  const cudaError_t status = cudaEventQuery(e.event());
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return false;
}

double elapsed_ms(const EventState& start, const EventState& end) {
  const CudaEvent& a = cuda_event(start);
  const CudaEvent& b = cuda_event(end);
  if (a.timing() != EventTiming::enabled || b.timing() != EventTiming::enabled) {
    throw ValueError("elapsed_ms: both events must be created with EventTiming::enabled");
  }
  DeviceGuard guard(b.index());
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, a.event(), b.event()), "cudaEventElapsedTime");
  return static_cast<double>(ms);
}

mixprec::AllocatorStats pool_stats(Device device) {
  const cuda::AllocatorStats pool = cuda::allocator_stats(device);
  mixprec::AllocatorStats s;
  s.allocated_bytes = pool.allocated_bytes;
  s.cached_bytes = pool.cached_bytes;
  s.reserved_bytes = pool.reserved_bytes;
  return s;
}

}  // namespace

extern const DeviceServices kDeviceServices;
const DeviceServices kDeviceServices{
    .execution = Execution::queued,
    .allocate_staging = &allocate_staging,
    .upload = &upload,
    .create_event = &create_event,
    .record_event = &record_event,
    .wait_event = &wait_event,
    .synchronize_event = &synchronize_event,
    .event_completed = &event_completed,
    .elapsed_ms = &elapsed_ms,
    .allocator_stats = &pool_stats,
};

}  // namespace mixprec::cuda
