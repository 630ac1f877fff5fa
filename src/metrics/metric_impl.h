// Behind the Metric handle. Every metric here is a ratio total / count accumulated in double
// (Keras's Mean and MeanMetricWrapper); subclasses turn a batch into (total, count).
//
// One path for every device: a batch is counted where its tensors are (add): its total is a
// float64 scalar computed by ops and summed into an accumulator on that device, and only its
// count (known from the shape) is a host number. result() reads the accumulator back when the
// value is shown (a progress redraw, the end of an epoch): on a device that queues its work (a
// GPU) that is the one synchronisation, and update_state never waits for it; on the CPU the read
// is free. Sums of whole counts are exact in float64 on every device.
#pragma once

#include <string>

#include "mixprec/tensor.h"

namespace mixprec::metrics {
class Metric;
}

namespace mixprec::metrics::detail {

class MetricImpl {
 public:
  explicit MetricImpl(std::string name) : name_(std::move(name)) {}
  virtual ~MetricImpl() = default;

  // Accuracy-style metrics override this; the default throws ValueError (Mean).
  virtual void update(const Tensor& y_true, const Tensor& y_pred);
  // Mean overrides this; the default throws ValueError (accuracy-style metrics).
  virtual void update_values(const Tensor& values);

  // Reads the accumulator back (synchronises with its device).
  double result() const;
  void reset();

  // The running sums, for a training checkpoint taken inside an epoch (src/io/checkpoint.cpp):
  // read back (a GPU sync), and set again, bit for bit, before the resumed epoch's next batch.
  struct Accumulator {
    double count = 0.0;
    double total = 0.0;
  };
  Accumulator accumulator() const;
  // The total becomes a float64 scalar on the CPU; add() moves it to the batches' device.
  void set_accumulator(const Accumulator& sums);
  const std::string& name() const { return name_; }

 protected:
  // `total`: a float64 scalar on the batch's device (its matches or sum); `count` on the host.
  void add(const Tensor& total, double count);

 private:
  std::string name_;
  double count_ = 0.0;
  Tensor total_;  // float64 scalar on the device of the batches; undefined until one
};

// The implementation behind a Metric handle; ValueError for an undefined one. (The public handle
// keeps its implementation private and declares no friend; metric.cpp reaches the member through
// an explicit instantiation, where access checking does not apply.)
MetricImpl& impl_of(const Metric& metric);

}  // namespace mixprec::metrics::detail
