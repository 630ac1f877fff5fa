// The prefetcher (see prefetch.h): a producer thread, a bounded queue of finished batches and, for
// a device that queues its work (CUDA), the overlapped host-to-device copy through the device's
// services (backend/device_services.h: staging, the copy stream, one event per batch that the
// compute stream waits on when the batch is handed out). No device kind is named here.
#include "data/prefetch.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/device_services.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

// Marks the end of one batch's host-to-device copy on the device's copy stream. Before anything on
// the compute stream uses the batch (or frees its blocks back to the compute stream's pool, where
// the next allocation could hand them to a kernel while the copy still writes them), the compute
// stream must wait for it: order_compute() queues that wait (no host sync); the destructor queues
// it when no one did (a batch dropped unconsumed at shutdown). Declared after the batch in Slot so
// that it runs before the batch's tensors are released.
class CopyFence {
 public:
  CopyFence(const DeviceServices& services, Device device)
      : services_(services), event_(services.create_event(device, EventTiming::disabled)) {}
  ~CopyFence() {
    try {
      order_compute();
    } catch (...) {  // a failing device at shutdown: nothing more can be done here
    }
  }
  CopyFence(const CopyFence&) = delete;
  CopyFence& operator=(const CopyFence&) = delete;

  // After the copies were queued on the copy stream.
  void record() {
    services_.record_event(*event_, Stream::copy);
    recorded_ = true;
  }
  // The compute stream waits (on the device) for the copy; once.
  void order_compute() {
    if (!recorded_ || ordered_) return;
    ordered_ = true;
    services_.wait_event(Stream::compute, *event_);
  }

 private:
  const DeviceServices& services_;
  Event event_;
  bool recorded_ = false;
  bool ordered_ = false;
};

// Staging buffers kept for reuse by every prefetcher of the process: pinning host memory costs
// milliseconds per tens of MB (page locking), and fit() makes a prefetcher per epoch (an epoch of
// the seed's MLP at batch 8192 is six steps). Never freed, like the transfer staging buffers;
// bounded by kKeep buffers of the largest batch seen. A buffer is reused only for the kind of
// memory it is (the allocate_staging entry that made it).
class StagingPool {
 public:
  static StagingPool& instance() {
    static auto* pool = new StagingPool();  // never destroyed: prefetchers may outlive statics
    return *pool;
  }
  // A buffer of at least `bytes` (a kept one when one fits).
  StagingBuffer take(const DeviceServices& services, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].kind == services.allocate_staging && free_[i].buffer.size() >= bytes) {
          StagingBuffer b = std::move(free_[i].buffer);
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return b;
        }
      }
    }
    return services.allocate_staging(bytes);
  }
  // `b` must have no copy in flight.
  void give(const DeviceServices& services, StagingBuffer b) {
    if (!b) return;
    StagingBuffer dropped;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back({services.allocate_staging, std::move(b)});
    if (free_.size() > kKeep) {  // drop the smallest
      std::size_t smallest = 0;
      for (std::size_t i = 1; i < free_.size(); ++i) {
        if (free_[i].buffer.size() < free_[smallest].buffer.size()) smallest = i;
      }
      dropped = std::move(free_[smallest].buffer);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(smallest));
    }
  }

 private:
  struct Kept {
    StagingBuffer (*kind)(std::size_t) = nullptr;  // the entry that allocated it
    StagingBuffer buffer;
  };
  static constexpr std::size_t kKeep = 8;  // two or three prefetchers' worth
  std::mutex mutex_;
  std::vector<Kept> free_;
};

constexpr std::size_t kTargetsAlignment = 256;  // y's offset in the staging buffer

// The producer's half of the overlapped copy, used on the producer thread only. Each batch's x and
// y are packed into one of a few rotating staging buffers (a buffer is refilled only after its
// previous copy finished: the producer waits for that, never the consumer); the device tensors
// are allocated, the copy stream waits for the work queued so far on the compute stream (which may
// still use blocks the allocation just handed out, freed by the consumer's last step), and the
// copies are queued on the copy stream. The compute work queued afterwards (the steps on earlier
// batches) runs while the copy is in flight: that is the overlap Tensor::to cannot give, since it
// also makes the compute stream wait for the copy right away.
class DeviceStager {
 public:
  DeviceStager(const DeviceServices& services, Device device, std::size_t buffers)
      : services_(services),
        device_(device),
        allocated_(services.create_event(device, EventTiming::disabled)) {
    buffers_.resize(buffers);
    for (Buffer& b : buffers_) b.done = services_.create_event(device_, EventTiming::disabled);
  }
  ~DeviceStager() {
    for (Buffer& b : buffers_) {
      try {
        if (b.used) services_.synchronize_event(*b.done);  // its copy no longer reads the buffer
        StagingPool::instance().give(services_, std::move(b.staging));
      } catch (...) {  // a failing device at shutdown: the buffer is freed with b
      }
    }
  }
  DeviceStager(const DeviceStager&) = delete;
  DeviceStager& operator=(const DeviceStager&) = delete;

  // `host`'s x and y (CPU tensors) copied to the device; `fence` marks the end of the copies.
  Batch stage(const Batch& host, std::unique_ptr<CopyFence>& fence) {
    const Tensor x = host.x.contiguous();
    const Tensor y = host.y.defined() ? host.y.contiguous() : Tensor();
    const std::size_t x_bytes = x.nbytes();
    const std::size_t y_offset =
        (x_bytes + kTargetsAlignment - 1) / kTargetsAlignment * kTargetsAlignment;
    const std::size_t total = y_offset + (y.defined() ? y.nbytes() : 0);

    Buffer& b = buffers_[next_++ % buffers_.size()];
    if (b.used) services_.synchronize_event(*b.done);  // its last copy finished reading it
    if (b.staging.size() < total) {
      StagingPool::instance().give(services_, std::exchange(b.staging, StagingBuffer{}));
      b.staging = StagingPool::instance().take(services_, total);
    }
    if (x_bytes > 0) std::memcpy(b.staging.data(), x.data_ptr(), x_bytes);
    if (y.defined() && y.nbytes() > 0) {
      std::memcpy(b.staging.data() + y_offset, y.data_ptr(), y.nbytes());
    }

    fence = std::make_unique<CopyFence>(services_, device_);
    Batch out;
    out.x = core::make_tensor(x.shape(), x.dtype(), device_);
    if (y.defined()) out.y = core::make_tensor(y.shape(), y.dtype(), device_);
    services_.record_event(*allocated_, Stream::compute);
    services_.wait_event(Stream::copy, *allocated_);
    services_.upload(b.staging, 0, out.x);
    if (y.defined()) services_.upload(b.staging, y_offset, out.y);
    services_.record_event(*b.done, Stream::copy);
    b.used = true;
    fence->record();
    return out;
  }

 private:
  struct Buffer {
    StagingBuffer staging;
    Event done;  // the last copy out of this buffer
    bool used = false;
  };
  const DeviceServices& services_;
  Device device_;
  Event allocated_;
  std::vector<Buffer> buffers_;
  std::size_t next_ = 0;
};

// The services of `device`'s backend; nullptr when this build has none (Tensor::to then throws
// the one DeviceError).
const DeviceServices* services_of(Device device) {
  const Backend* backend = find_backend(device.type);
  return backend == nullptr ? nullptr : backend->services;
}

}  // namespace

// A finished batch, or the exception that producing it threw. `fence` is declared after `batch`
// so that it is destroyed first (see CopyFence).
struct Prefetcher::Slot {
  std::int64_t index = 0;
  Batch batch;
  std::unique_ptr<CopyFence> fence;  // an overlapped device copy only
  std::exception_ptr error;
};

struct Prefetcher::Queue {
  std::mutex mutex;
  std::condition_variable changed;  // a slot was pushed or popped, or stop was set
  std::deque<Slot> ready;           // in index order
  bool stop = false;
  std::thread producer;
  std::unique_ptr<DeviceStager> stager;  // made and used by the producer; freed after the join
};

PrefetchOptions prefetch_options_for(Device device) {
  // A device that runs the step on the host's cores gains nothing from a producer thread; any
  // other does (a device this build lacks too: its DeviceError comes from the first move).
  const DeviceServices* services = services_of(device);
  const bool on_host = services != nullptr && services->execution == Execution::synchronous;
  return {.device = device, .mode = on_host ? PrefetchMode::synchronous : PrefetchMode::background};
}

Prefetcher::Prefetcher(std::int64_t count, Source source, PrefetchOptions options)
    : count_(count), source_(std::move(source)), options_(options) {
  if (count < 0) {
    throw ValueError("Prefetcher: the number of batches must be >= 0, got " +
                     std::to_string(count));
  }
  if (!source_) throw ValueError("Prefetcher: the batch source is an empty function");
  if (options_.depth < 1) {
    throw ValueError("Prefetcher: depth must be >= 1, got " + std::to_string(options_.depth) +
                     "; 2 overlaps the next batch with the current step");
  }
  if (options_.mode == PrefetchMode::background && count_ > 0) {
    queue_ = std::make_unique<Queue>();
    queue_->producer = std::thread([this] { run_producer(); });
  }
}

Prefetcher::Prefetcher(const Pipeline& pipeline, const Epoch& epoch, PrefetchOptions options)
    : Prefetcher(
          epoch.size(),
          [&pipeline, &epoch](std::int64_t i) { return pipeline.apply(epoch.batch(i)); }, options) {
}

Prefetcher::~Prefetcher() { stop_producer(); }

void Prefetcher::stop_producer() noexcept {
  if (!queue_) return;
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stop = true;
  }
  queue_->changed.notify_all();
  if (queue_->producer.joinable()) queue_->producer.join();
  queue_->ready.clear();   // each fence orders the compute stream before its batch is freed
  queue_->stager.reset();  // waits for the staging buffers' last copies
}

const DeviceServices* Prefetcher::services() const {
  return options_.services != nullptr ? options_.services : services_of(options_.device);
}

bool Prefetcher::overlapped_copy() const {
  // Staging pays off only where the copy can run beside queued compute work.
  const DeviceServices* services = this->services();
  return services != nullptr && services->execution == Execution::queued &&
         options_.copy == DeviceCopy::overlapped && options_.mode == PrefetchMode::background;
}

Batch Prefetcher::produce(std::int64_t index) const {
  Batch batch = source_(index);
  // Explicit moves: the producer thread's default device is the CPU whatever the consumer's is.
  if (batch.x.defined()) batch.x = batch.x.to(options_.device);
  if (batch.y.defined()) batch.y = batch.y.to(options_.device);
  return batch;
}

void Prefetcher::produce_into(Slot& slot) {
  if (!overlapped_copy()) {
    slot.batch = produce(slot.index);
    return;
  }
  Batch host = source_(slot.index);
  const bool on_host = host.x.defined() && host.x.device().is_cpu() &&
                       (!host.y.defined() || host.y.device().is_cpu());
  if (!on_host) {  // a step that made device tensors itself: the ordinary move
    if (host.x.defined()) host.x = host.x.to(options_.device);
    if (host.y.defined()) host.y = host.y.to(options_.device);
    slot.batch = std::move(host);
    return;
  }
  // One buffer per batch that may wait in the queue, plus the one being filled.
  if (!queue_->stager) {
    queue_->stager = std::make_unique<DeviceStager>(*services(), options_.device,
                                                    static_cast<std::size_t>(options_.depth) + 1);
  }
  slot.batch = queue_->stager->stage(host, slot.fence);
}

void Prefetcher::run_producer() {
  // Batches never record a graph (grad mode is per thread: set it here too).
  NoGradScope no_grad;
  Queue& q = *queue_;
  for (std::int64_t i = 0; i < count_; ++i) {
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      q.changed.wait(lock, [&] {
        return q.stop || static_cast<std::int64_t>(q.ready.size()) < options_.depth;
      });
      if (q.stop) return;
    }
    Slot slot;
    slot.index = i;
    try {
      produce_into(slot);
    } catch (...) {
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      q.ready.push_back(std::move(slot));
    }
    q.changed.notify_all();
    if (failed) return;  // nothing after a failed batch: the consumer stops there
  }
}

Batch Prefetcher::next() {
  if (next_ >= count_) {
    throw ValueError("Prefetcher::next: all " + std::to_string(count_) +
                     " batches were delivered already");
  }
  if (failed_at_ >= 0) {
    throw ValueError("Prefetcher::next: batch " + std::to_string(failed_at_) +
                     " failed (its error was thrown then); no later batch was produced");
  }
  const std::int64_t index = next_++;
  if (!queue_) {
    try {
      return produce(index);
    } catch (...) {
      failed_at_ = index;
      throw;
    }
  }
  Slot slot;
  {
    Queue& q = *queue_;
    std::unique_lock<std::mutex> lock(q.mutex);
    q.changed.wait(lock, [&] { return !q.ready.empty(); });
    slot = std::move(q.ready.front());
    q.ready.pop_front();
  }
  queue_->changed.notify_all();
  if (slot.index != index) {  // cannot happen: one producer pushes in order
    throw Error("Prefetcher::next: expected batch " + std::to_string(index) + ", the queue held " +
                std::to_string(slot.index));
  }
  if (slot.error) {
    failed_at_ = index;
    std::rethrow_exception(slot.error);
  }
  // The compute stream waits for this batch's copy before the caller's work on it (queued on
  // the GPU; the host goes on).
  if (slot.fence) slot.fence->order_compute();
  return std::move(slot.batch);
}

}  // namespace mixprec::data
