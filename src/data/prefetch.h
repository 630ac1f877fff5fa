// The input pipeline's prefetcher: batches of an epoch assembled ahead of the training step and
// delivered on the device the model computes on. Internal: fit(), evaluate() and predict()
// (src/models) use it.
//
//   data::Prefetcher batches(train, epoch, {.device = Device::cuda(0),
//                                           .mode = data::PrefetchMode::background});
//   for (std::int64_t i = 0; i < batches.size(); ++i) step(batches.next());  // batch i, on cuda:0
//
// background: one producer thread assembles batch i + 1, i + 2, ... (Epoch::batch, then the
// pipeline's steps: exactly the batches, in the order, of the synchronous loop) while the caller
// works on batch i. On a CUDA target the producer also queues each batch's host-to-device copy
// (DeviceCopy::overlapped: packed into a pinned buffer, copied on the GPU's copy stream, with an
// event that next() makes the compute stream wait on), so the copy of batch i + 1 runs while the
// GPU computes step i and the consumer never waits on the host for a copy. At most `depth`
// finished batches wait in the queue (the producer then sleeps): with depth 2 the memory of three
// batches (the one in use and two ahead) is enough.
// synchronous: next() assembles and moves the batch on the calling thread (the loop of old; on the
// CPU it makes the same calls as before, so results are bit-identical).
//
// Threading rules of the producer: it makes CPU tensors (the default device is per thread and
// CPU there) and moves them to the target explicitly; it runs the pipeline's steps under
// NoGradScope (grad mode is per thread too); what it shares with the consumer is the host
// allocator (mutex and atomics, src/core/allocator.cpp), the CUDA caching allocator, the
// transfer staging and the prefetch staging pool (each with its own mutex), and the device's
// streams (reached through backend/device_services.h; the CUDA runtime is thread-safe). Steps must
// not draw from default_generator(): the consumer's Dropout draws from it at the same time (none of
// the ready-made steps does).
//
// Errors: an exception thrown while producing batch i (a step's error, an out-of-memory
// DeviceError) is stored and rethrown by the next() that would return batch i; batches before it
// are delivered normally and nothing after it is produced. Shutdown: the destructor (also on
// early exit by an exception in the caller's step) stops the producer after the batch it is
// assembling, if any, and joins it; queued batches are freed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "mixprec/data/dataset.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/device.h"

namespace mixprec {
struct DeviceServices;  // backend/device_services.h
}

namespace mixprec::data {

enum class PrefetchMode {
  synchronous,  // next() assembles the batch on the calling thread
  background,   // a producer thread assembles batches ahead of next()
};

// How a background prefetcher moves a batch to a device that queues its work (Execution::queued,
// backend/device_services.h: a CUDA GPU). A synchronous device (the CPU) always takes Tensor::to.
enum class DeviceCopy {
  // Its own pinned staging and copy-stream copy, ordered after the compute work queued when the
  // batch's device memory was allocated, with an event the compute stream waits on only when
  // next() hands the batch out: the copy runs while the GPU computes the steps before it.
  overlapped,
  // Tensor::to (the transfer path of every other move): the compute stream waits for the copy as
  // soon as it is queued, so the copy does not overlap the steps queued after it.
  ordered,
};

struct PrefetchOptions {
  Device device = Device::cpu();  // where next() delivers x and y
  PrefetchMode mode = PrefetchMode::synchronous;
  std::int64_t depth = 2;                    // background: finished batches waiting at most (>= 1)
  DeviceCopy copy = DeviceCopy::overlapped;  // background mode on a queued device only
  // The device services that move batches: null for those of `device`'s backend. Tests pass a
  // stand-in (the CPU's with Execution::queued runs the overlapped copy without a GPU); it must
  // outlive the prefetcher.
  const DeviceServices* services = nullptr;
};

// What fit() uses: background on a device that queues work, a CUDA GPU (so that assembly and
// copies overlap the step), synchronous on one that runs it on the host, the CPU (a second thread
// would compete with the step's OpenMP threads for the same cores).
PrefetchOptions prefetch_options_for(Device device);

class Prefetcher {
 public:
  // Produces batch i for i in [0, count), in order.
  using Source = std::function<Batch(std::int64_t index)>;

  // ValueError for count < 0, an empty source or depth < 1. A background prefetcher starts its
  // producer here.
  Prefetcher(std::int64_t count, Source source, PrefetchOptions options = {});
  // The batches of `epoch` with `pipeline`'s steps applied: pipeline.apply(epoch.batch(i)). Both
  // are referenced, not copied: they must outlive the prefetcher.
  Prefetcher(const Pipeline& pipeline, const Epoch& epoch, PrefetchOptions options = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  std::int64_t size() const { return count_; }
  std::int64_t delivered() const { return next_; }  // batches next() has returned or thrown for
  const PrefetchOptions& options() const { return options_; }

  // Batch delivered() on options().device; the source's exception when producing it failed.
  // ValueError once every batch was delivered, and after a failed batch (nothing follows it).
  Batch next();

 private:
  struct Queue;
  struct Slot;
  Batch produce(std::int64_t index) const;  // source, then moved with Tensor::to
  const DeviceServices* services() const;   // options().services, or the device backend's
  bool overlapped_copy() const;             // DeviceCopy::overlapped applies
  void produce_into(Slot& slot);            // producer thread: source, then to the device
  void run_producer();
  void stop_producer() noexcept;

  std::int64_t count_ = 0;
  Source source_;
  PrefetchOptions options_;
  std::int64_t next_ = 0;
  std::int64_t failed_at_ = -1;   // the batch whose error next() threw, if any
  std::unique_ptr<Queue> queue_;  // background mode only
};

}  // namespace mixprec::data
