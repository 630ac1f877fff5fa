// The gradient all-reduce overlapped with the backward pass (DataParallel::overlap): the
// variables' gradients cut into float32 buckets in reverse order (PyTorch DDP's order: the last
// layers' gradients are final first), each bucket weighted, flattened, summed over the ranks and
// copied back by one communication thread as soon as all its gradients are reported, while the
// main thread goes on with the backward pass (autograd/gradient_ready.h). CPU tensors only: the
// thread touches raw float32 host memory and no op of the library. Internal.
//
//   OverlappedReducer reducer;                       // once per fit(): starts the thread
//   reducer.begin(variables, weight, bucket_bytes);  // each step
//   try {
//     grads = grad_reporting_ready(loss, variables,
//                                  [&](std::size_t i, const Tensor& g) { reducer.ready(i, g); });
//   } catch (...) { reducer.abandon(); throw; }
//   reducer.finish();                                // every bucket reduced; rethrows its error
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::distributed::detail {

// Indices n-1, n-2, ..., 0 of gradients of `numels` elements, cut into buckets whose float32 bytes
// add up to at most bucket_bytes (a gradient larger than that is a bucket of its own).
std::vector<std::vector<std::size_t>> plan_reverse_buckets(const std::vector<std::int64_t>& numels,
                                                           std::int64_t bucket_bytes);

class OverlappedReducer {
 public:
  OverlappedReducer();
  // Waits for the buckets in flight, then ends the thread.
  ~OverlappedReducer();
  OverlappedReducer(const OverlappedReducer&) = delete;
  OverlappedReducer& operator=(const OverlappedReducer&) = delete;

  // Starts a step over the gradients of `variables` (float32, on the CPU; DTypeError /
  // DeviceError otherwise), each to be multiplied by `weight` and summed over the ranks. The
  // buckets are planned again only when the variables' sizes or bucket_bytes change.
  void begin(const std::vector<Tensor>& variables, double weight, std::int64_t bucket_bytes);
  // The gradient of variable `index` is final (contiguous, float32, owned by the caller's result
  // only): launches, in plan order, every bucket whose gradients are all reported. Every rank
  // launches the same buckets in the same order whatever order its gradients come in.
  void ready(std::size_t index, const Tensor& gradient);
  // Waits until every bucket is reduced (the gradients hold the weighted sums over the ranks) and
  // rethrows the first error of the communication thread. Every gradient must have been reported.
  void finish();
  // After a backward pass that threw: waits for the buckets in flight, then takes part in one
  // scalar collective in place of the buckets it never launched, so that a rank still reducing
  // them fails the call check (a DistributedError there) instead of waiting forever; its own
  // error is ignored (the caller rethrows the backward pass's). Relies on the call checks of the
  // process group (MIXPREC_DISTRIBUTED_CHECKS, on by default).
  void abandon() noexcept;

 private:
  void run();                              // the communication thread
  void reduce_bucket(std::size_t bucket);  // on that thread
  void launch_ready_buckets();             // with mutex_ held
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::int64_t> numels_;
  std::int64_t bucket_bytes_ = 0;
  std::vector<Tensor> buffers_;         // one flat float32 buffer per bucket, reused every step
  std::vector<std::size_t> bucket_of_;  // variable index -> bucket
  std::vector<std::size_t> missing_;    // per bucket: gradients not yet reported this step
  std::vector<Tensor> gradients_;       // this step's, by variable index
  float weight_ = 1.0f;
  std::size_t next_launch_ = 0;  // buckets [0, next_launch_) are launched this step

  std::mutex mutex_;
  std::condition_variable work_;  // a bucket queued, or stop
  std::condition_variable idle_;  // a bucket done
  std::deque<std::size_t> queue_;
  std::size_t done_ = 0;  // buckets finished this step (reduced or skipped after an error)
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mixprec::distributed::detail
