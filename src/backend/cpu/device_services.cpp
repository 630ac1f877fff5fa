// The cpu backend's DeviceServices table (backend/device_services.h). The CPU runs every call to
// completion before it returns: staging is ordinary aligned host memory, an upload is a memcpy,
// events are host timestamps (steady clock) and waiting on them costs nothing.
#include "backend/device_services.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "core/allocator.h"
#include "mixprec/error.h"
#include "mixprec/memory.h"

namespace mixprec::cpu {

namespace {

constexpr std::size_t kStagingAlignment = 64;

void free_staging(std::byte* data, std::size_t) noexcept { std::free(data); }

StagingBuffer allocate_staging(std::size_t bytes) {
  const std::size_t rounded =
      (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
  void* data = std::aligned_alloc(kStagingAlignment, rounded == 0 ? kStagingAlignment : rounded);
  if (data == nullptr) {
    throw DeviceError("out of host memory: a staging buffer of " + std::to_string(bytes) +
                      " bytes could not be allocated");
  }
  return StagingBuffer(static_cast<std::byte*>(data), bytes, &free_staging);
}

void check_cpu(Device device, const char* what) {
  if (!device.is_cpu()) {
    throw DeviceError(std::string(what) + ": the cpu backend got a tensor or event on " +
                      device.to_string());
  }
}

void upload(const StagingBuffer& src, std::size_t offset, Tensor& dst) {
  check_cpu(dst.device(), "upload");
  const std::size_t bytes = dst.nbytes();
  if (offset > src.size() || bytes > src.size() - offset) {
    throw ValueError("upload: " + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(offset) + " lie outside a staging buffer of " +
                     std::to_string(src.size()) + " bytes");
  }
  if (bytes > 0) std::memcpy(dst.data_ptr(), src.data() + offset, bytes);
}

// The moment the host reached record_event: on the CPU, every earlier call's work was done then.
class HostEvent final : public EventState {
 public:
  HostEvent(Device device, EventTiming timing) : EventState(device), timing_(timing) {}
  void record() {
    when_ = std::chrono::steady_clock::now();
    recorded_ = true;
  }
  bool recorded() const { return recorded_; }
  EventTiming timing() const { return timing_; }
  std::chrono::steady_clock::time_point when() const { return when_; }

 private:
  EventTiming timing_;
  bool recorded_ = false;
  std::chrono::steady_clock::time_point when_{};
};

const HostEvent& host_event(const EventState& event) {
  check_cpu(event.device(), "event");
  return static_cast<const HostEvent&>(event);
}

Event create_event(Device device, EventTiming timing) {
  check_cpu(device, "create_event");
  return std::make_unique<HostEvent>(device, timing);
}

void record_event(EventState& event, Stream) {
  check_cpu(event.device(), "record_event");
  static_cast<HostEvent&>(event).record();
}

// Program order already runs every stream's work before the next call.
void wait_event(Stream, const EventState& event) { (void)host_event(event); }
void synchronize_event(const EventState& event) { (void)host_event(event); }
bool event_completed(const EventState& event) {
  (void)host_event(event);
  return true;
}

double elapsed_ms(const EventState& start, const EventState& end) {
  const HostEvent& a = host_event(start);
  const HostEvent& b = host_event(end);
  if (a.timing() != EventTiming::enabled || b.timing() != EventTiming::enabled) {
    throw ValueError("elapsed_ms: both events must be created with EventTiming::enabled");
  }
  if (!a.recorded() || !b.recorded()) {
    throw ValueError("elapsed_ms: both events must have been recorded");
  }
  return std::chrono::duration<double, std::milli>(b.when() - a.when()).count();
}

// The host allocator (src/core/allocator.cpp): requested bytes in use (memory_stats' counter) and
// its cache of freed large blocks.
AllocatorStats allocator_stats(Device device) {
  check_cpu(device, "allocator_stats");
  AllocatorStats s;
  s.allocated_bytes = memory_stats(Device::cpu()).current_bytes;
  s.cached_bytes = static_cast<std::int64_t>(core::cpu_cached_bytes());
  s.reserved_bytes = s.allocated_bytes + s.cached_bytes;
  return s;
}

}  // namespace

extern const DeviceServices kDeviceServices;
const DeviceServices kDeviceServices{
    .execution = Execution::synchronous,
    .allocate_staging = &allocate_staging,
    .upload = &upload,
    .create_event = &create_event,
    .record_event = &record_event,
    .wait_event = &wait_event,
    .synchronize_event = &synchronize_event,
    .event_completed = &event_completed,
    .elapsed_ms = &elapsed_ms,
    .allocator_stats = &allocator_stats,
};

}  // namespace mixprec::cpu
