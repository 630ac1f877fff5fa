// A CUDA graph of the work one callable queues on a GPU's compute stream (issue 28), with its
// memory in a private pool of the caching allocator (caching_allocator.h, "Private pools"). The
// machinery behind mixprec::cuda::Graph (include/mixprec/cuda_graph.h) and
// models::GraphedTrainStep (src/models/graphed_step.h). CUDA builds only.
//
// capture() runs the callable once on the calling thread with the compute stream in capture mode
// (cudaStreamCaptureModeThreadLocal: a call of this thread that could synchronise with the GPU,
// e.g. a blocking copy back, fails instead of running outside the graph) and the thread's
// allocations routed to the graph's pool. The captured GPU work does not run: replay() runs it.
// Any failure (the callable throws, the capture is invalidated by a synchronising call, a cross-
// stream wait, an allocation failure, instantiation fails) ends the capture, releases the pool
// (nothing of it ran, so nothing is pending on its blocks) and throws DeviceError naming the cause;
// the stream is out of capture mode and no CUDA error is left pending.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/cuda/allocator.h"
#include "mixprec/device.h"

namespace mixprec::cuda {

class CapturedGraph {
 public:
  static std::unique_ptr<CapturedGraph> capture(Device device, const std::function<void()>& body);
  // Waits for the device's compute stream (one host wait: queued replays may still use the
  // pool), then destroys the graph and hands its pool to the shared cache.
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Enqueues one run of the graph on the compute stream; the host does not wait.
  void replay();
  Device device() const { return device_; }
  std::size_t nodes() const { return nodes_; }
  std::int64_t replays() const { return replays_; }
  PoolId pool() const { return pool_; }
  PrivatePoolStats pool_stats() const { return graph_pool_stats(device_, pool_); }

 private:
  CapturedGraph() = default;
  Device device_;
  cudaGraphExec_t exec_ = nullptr;
  PoolId pool_ = 0;
  std::size_t nodes_ = 0;
  std::int64_t replays_ = 0;
};

// Whether the calling thread is capturing on `device`'s compute stream (cudaStreamIsCapturing):
// code that would synchronise or draw host memory checks it to fail with a clear reason.
bool compute_stream_capturing(Device device);

}  // namespace mixprec::cuda
