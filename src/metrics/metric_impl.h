// Behind the Metric handle. Every metric here is a ratio total / count accumulated in double
// (Keras's Mean and MeanMetricWrapper); subclasses turn a batch into (total, count).
//
// Host synchronisation rule: a batch on the CPU is counted on the host (add), as before. A batch
// on a CUDA device is counted there (add_on_device): its total is a float64 scalar summed into a
// device accumulator by stream-ordered kernels, and only its count (known from the shape) is a
// host number; result() reads the accumulator back, the one synchronisation, when the value is
// shown (a progress redraw, the end of an epoch). update_state never waits for the GPU.
#pragma once

#include <string>

#include "mixprec/tensor.h"

namespace mixprec::metrics::detail {

class MetricImpl {
 public:
  explicit MetricImpl(std::string name) : name_(std::move(name)) {}
  virtual ~MetricImpl() = default;

  // Accuracy-style metrics override this; the default throws ValueError (Mean).
  virtual void update(const Tensor& y_true, const Tensor& y_pred);
  // Mean overrides this; the default throws ValueError (accuracy-style metrics).
  virtual void update_values(const Tensor& values);

  // Reads the device accumulator when there is one (synchronises with its GPU).
  double result() const;
  void reset();
  const std::string& name() const { return name_; }

 protected:
  void add(double total, double count) {
    total_ += total;
    count_ += count;
  }
  // `total`: a float64 scalar on a CUDA device (the batch's matches or sum); `count` on the host.
  void add_on_device(const Tensor& total, double count);

 private:
  std::string name_;
  double total_ = 0.0;
  double count_ = 0.0;
  Tensor device_total_;  // float64 scalar on the device of the batches; undefined until one
};

}  // namespace mixprec::metrics::detail
