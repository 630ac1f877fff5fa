// Device services of one device kind: pinned staging and asynchronous upload, events for stream
// ordering and timing, allocator statistics. What the prefetcher (src/data/prefetch.cpp), the step
// timer (src/models/step_timer.cpp) and the memory reports need from a device, with one calling
// path for every device:
//
//   const DeviceServices& sv = *backend_for(device).services;
//   StagingBuffer staging = sv.allocate_staging(bytes);           // pinned on a GPU
//   std::memcpy(staging.data(), host, bytes);
//   sv.upload(staging, 0, dst);                                   // queued on the copy stream
//   Event copied = sv.create_event(device, EventTiming::disabled);
//   sv.record_event(*copied, Stream::copy);
//   sv.wait_event(Stream::compute, *copied);                      // compute runs after the copy
//
// Streams are the device's work queues. A CUDA GPU has two (the compute stream of every kernel,
// the copy stream of host-to-device uploads) and runs them asynchronously to the host
// (Execution::queued). The CPU runs every call to completion before it returns
// (Execution::synchronous): its two "streams" are the program order, events are host timestamps,
// waits are no-ops, uploads are memcpy. Callers branch on `execution` only where the cost model
// differs (whether staging and a producer thread pay off), never on the device kind.
//
// Handles (StagingBuffer, Event) are RAII and opaque: no cudaEvent_t or cudaStream_t leaves the
// backend. Every entry is non-null in every backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "mixprec/device.h"
#include "mixprec/tensor.h"

namespace mixprec {

// How a device runs the work a call asks for.
enum class Execution {
  synchronous,  // done when the call returns (the CPU): reading results back costs nothing
  queued,       // queued on the device's streams, run later (CUDA): reading back waits for them
};

// A work queue of one device.
enum class Stream {
  compute,  // kernels, library calls, stream-ordered allocations
  copy,     // host-to-device uploads of staged data (overlap with compute)
};

// Whether an event can measure time (CUDA: timing events cost more to record).
enum class EventTiming { disabled, enabled };

// Host memory a device can copy from asynchronously: page-locked (pinned) on a CUDA GPU, ordinary
// aligned memory on the CPU. Move-only; frees itself. A buffer must not be freed (or refilled)
// while an upload from it is in flight: record an event after the upload and synchronise it first.
class StagingBuffer {
 public:
  using Release = void (*)(std::byte* data, std::size_t bytes) noexcept;

  StagingBuffer() = default;
  // Takes ownership of `data` (`bytes` long); `release` frees it.
  StagingBuffer(std::byte* data, std::size_t bytes, Release release) noexcept
      : data_(data), bytes_(bytes), release_(release) {}
  ~StagingBuffer() { reset(); }
  StagingBuffer(StagingBuffer&& other) noexcept
      : data_(other.data_), bytes_(other.bytes_), release_(other.release_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  StagingBuffer& operator=(StagingBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = other.data_;
      bytes_ = other.bytes_;
      release_ = other.release_;
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  void reset() noexcept {
    if (data_ != nullptr && release_ != nullptr) release_(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  Release release_ = nullptr;
};

// A point in a device's streams. Opaque: each backend derives its own state (the CPU: a host
// timestamp; CUDA: a cudaEvent_t and its device). Only the backend that created an event may be
// handed it back.
class EventState {
 public:
  virtual ~EventState() = default;
  Device device() const { return device_; }

 protected:
  explicit EventState(Device device) : device_(device) {}

 private:
  Device device_;
};
using Event = std::unique_ptr<EventState>;  // destroying it releases the backend's event

// What a device's allocator holds (the per-device tensor counters, current and peak, are
// memory_stats()'s: include/mixprec/memory.h).
struct AllocatorStats {
  std::int64_t allocated_bytes = 0;  // in blocks handed out now
  std::int64_t cached_bytes = 0;     // freed blocks kept for reuse (not in use)
  std::int64_t reserved_bytes = 0;   // held from the system or driver now: allocated + cached
};

struct DeviceServices {
  Execution execution = Execution::synchronous;

  // ---- staging and upload ----

  // Host memory of at least `bytes` (0 is allowed) that upload() copies from asynchronously.
  // Throws DeviceError when it cannot be had.
  StagingBuffer (*allocate_staging)(std::size_t bytes) = nullptr;
  // Queues the copy of dst.nbytes() bytes from `src` at `offset` into `dst` (contiguous, on this
  // backend's device kind) on dst's device's copy stream; returns before it runs (Execution::
  // queued). Not ordered against anything: order it with events (the copy stream after the
  // compute work that may still use dst's block; the compute stream after the copy).
  // ValueError when the range lies outside `src`.
  void (*upload)(const StagingBuffer& src, std::size_t offset, Tensor& dst) = nullptr;

  // ---- events: stream ordering and timing ----

  // An event of `device` (this backend's kind; DeviceError when it does not exist), not yet
  // recorded.
  Event (*create_event)(Device device, EventTiming timing) = nullptr;
  // Marks the work queued so far on `stream` of the event's device.
  void (*record_event)(EventState& event, Stream stream) = nullptr;
  // Work queued on `waiter` (of the event's device) after this call runs after the event's work;
  // the host does not wait. An event never recorded is complete.
  void (*wait_event)(Stream waiter, const EventState& event) = nullptr;
  // The host waits for the event's work.
  void (*synchronize_event)(const EventState& event) = nullptr;
  // Whether the event's work has finished (never waits). An event never recorded has.
  bool (*event_completed)(const EventState& event) = nullptr;
  // Milliseconds between two recorded timing events of one device (the end's work after the
  // start's); waits for neither: synchronise `end` first. ValueError for an event without timing.
  double (*elapsed_ms)(const EventState& start, const EventState& end) = nullptr;

  // ---- statistics ----

  // The allocator of `device` (all zero for a device whose allocator was never used).
  AllocatorStats (*allocator_stats)(Device device) = nullptr;
};

}  // namespace mixprec
