// The gradient all-reduce overlapped with the backward pass (overlapped_reducer.h).
#include "distributed/overlapped_reducer.h"

#include <string>
#include <utility>

#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"

namespace mixprec::distributed::detail {

std::vector<std::vector<std::size_t>> plan_reverse_buckets(const std::vector<std::int64_t>& numels,
                                                           std::int64_t bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::int64_t filled = 0;
  for (std::size_t k = numels.size(); k-- > 0;) {
    const auto bytes = static_cast<std::int64_t>(numels[k] * sizeof(float));
    if (buckets.empty() || filled + bytes > bucket_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += bytes;
  }
  return buckets;
}

OverlappedReducer::OverlappedReducer() : thread_([this] { run(); }) {}

OverlappedReducer::~OverlappedReducer() {
  {
    std::unique_lock lock(mutex_);
    wait_idle(lock);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
}

namespace {

void check_variable(const Tensor& v, std::size_t i) {
  if (v.dtype() != DType::float32) {
    throw DTypeError("DataParallel: gradient " + std::to_string(i) + " is " +
                     std::string(dtype_name(v.dtype())) +
                     ", expected float32 (the gradients of float32 variables)");
  }
  if (v.device().type != DeviceType::cpu) {
    throw DeviceError("DataParallel: the overlapped all-reduce takes CPU gradients, variable " +
                      std::to_string(i) + " is on " + v.device().to_string());
  }
}

}  // namespace

void OverlappedReducer::begin(const std::vector<Tensor>& variables, double weight,
                              std::int64_t bucket_bytes) {
  std::vector<std::int64_t> numels;
  numels.reserve(variables.size());
  for (std::size_t i = 0; i < variables.size(); ++i) {
    check_variable(variables[i], i);
    numels.push_back(variables[i].numel());
  }
  std::unique_lock lock(mutex_);
  wait_idle(lock);  // a step abandoned mid-way leaves nothing in flight
  if (numels != numels_ || bucket_bytes != bucket_bytes_) {
    numels_ = std::move(numels);
    bucket_bytes_ = bucket_bytes;
    buckets_ = plan_reverse_buckets(numels_, bucket_bytes);
    bucket_of_.assign(numels_.size(), 0);
    buffers_.clear();
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      std::int64_t total = 0;
      for (std::size_t i : buckets_[b]) {
        bucket_of_[i] = b;
        total += numels_[i];
      }
      buffers_.push_back(empty(Shape{total}, {.dtype = DType::float32, .device = Device::cpu()}));
    }
  }
  missing_.clear();
  for (const auto& bucket : buckets_) missing_.push_back(bucket.size());
  gradients_.assign(numels_.size(), Tensor());
  weight_ = static_cast<float>(weight);
  next_launch_ = 0;
  done_ = 0;
  error_ = nullptr;
}

void OverlappedReducer::ready(std::size_t index, const Tensor& gradient) {
  {
    std::lock_guard lock(mutex_);
    if (index >= gradients_.size() || gradients_[index].defined()) {
      throw Error("internal: OverlappedReducer::ready: gradient " + std::to_string(index) +
                  " is out of range or reported twice");
    }
    if (gradient.numel() != numels_[index] || gradient.dtype() != DType::float32 ||
        !gradient.is_contiguous()) {
      throw Error("internal: OverlappedReducer::ready: gradient " + std::to_string(index) +
                  " is not a contiguous float32 tensor of its variable's size");
    }
    gradients_[index] = gradient;
    --missing_[bucket_of_[index]];
    launch_ready_buckets();
  }
  work_.notify_one();
}

void OverlappedReducer::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && missing_[next_launch_] == 0) {
    queue_.push_back(next_launch_++);
  }
}

void OverlappedReducer::finish() {
  std::unique_lock lock(mutex_);
  wait_idle(lock);
  gradients_.assign(gradients_.size(), Tensor());  // the reducer keeps no gradient between steps
  if (next_launch_ != buckets_.size()) {
    throw Error("internal: OverlappedReducer::finish: " +
                std::to_string(buckets_.size() - next_launch_) + " buckets were never complete");
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void OverlappedReducer::abandon() noexcept {
  std::unique_lock lock(mutex_);
  wait_idle(lock);
  gradients_.assign(gradients_.size(), Tensor());
  // A bucket that failed the call check met the other rank's own stand-in call (or its failing
  // bucket): that rank has left the step already, and a stand-in from here would wait forever.
  const bool met_already = error_ != nullptr;
  error_ = nullptr;
  lock.unlock();
  if (met_already) return;
  try {
    (void)all_reduce(1.0, ReduceOp::max);
  } catch (...) {
    // A rank that went on reducing fails the call check there, as intended.
  }
}

void OverlappedReducer::wait_idle(std::unique_lock<std::mutex>& lock) {
  idle_.wait(lock, [this] { return queue_.empty() && done_ == next_launch_; });
}

void OverlappedReducer::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    const std::size_t bucket = queue_.front();
    queue_.pop_front();
    if (!error_) {
      // The bucket's gradients and buffer are this thread's until it is done: the main thread
      // only reads them after wait_idle().
      lock.unlock();
      std::exception_ptr failure;
      try {
        reduce_bucket(bucket);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure && !error_) error_ = failure;
    }
    ++done_;
    idle_.notify_all();
  }
}

void OverlappedReducer::reduce_bucket(std::size_t bucket) {
  Tensor& buffer = buffers_[bucket];
  float* flat = buffer.data<float>();
  const float w = weight_;
  std::int64_t offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    const float* g = gradients_[i].data<float>();
    for (std::int64_t k = 0; k < numels_[i]; ++k) flat[offset + k] = w * g[k];
    offset += numels_[i];
  }
  all_reduce(buffer, ReduceOp::sum);
  offset = 0;
  for (std::size_t i : buckets_[bucket]) {
    float* g = gradients_[i].data<float>();
    for (std::int64_t k = 0; k < numels_[i]; ++k) g[k] = flat[offset + k];
    offset += numels_[i];
  }
}

}  // namespace mixprec::distributed::detail
