// Behind the Metric handle. Every metric here is a ratio total / count accumulated in double
// (Keras's Mean and MeanMetricWrapper); subclasses turn a batch into (total, count).
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

  double result() const { return count_ > 0.0 ? total_ / count_ : 0.0; }
  void reset() { total_ = count_ = 0.0; }
  const std::string& name() const { return name_; }

 protected:
  void add(double total, double count) {
    total_ += total;
    count_ += count;
  }

 private:
  std::string name_;
  double total_ = 0.0;
  double count_ = 0.0;
};

}  // namespace mixprec::metrics::detail
