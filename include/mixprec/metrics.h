// Metrics (keras.metrics): stateful accumulators over batches. update_state() adds a batch,
// result() is the value over everything since the last reset_state(). A Metric is a handle: copies
// share one state. Metrics compute in float64 on the host, record no autograd graph and accept
// model outputs of any floating dtype.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::metrics {

namespace detail {
class MetricImpl;
}

class Metric {
 public:
  Metric() = default;  // undefined: defined() is false; every other member throws ValueError
  explicit Metric(std::shared_ptr<detail::MetricImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  // Accuracy-style metrics: one batch of targets and predictions.
  void update_state(const Tensor& y_true, const Tensor& y_pred);
  // Mean: one batch of values (every element counts once), or one value.
  void update_state(const Tensor& values);
  void update_state(double value);
  // The metric over all batches since the last reset (0 before any update).
  double result() const;
  void reset_state();
  const std::string& name() const;

  // Keras get_config(): the class and options of a built-in metric; nullopt for a custom one,
  // which a saved config cannot describe.
  struct Config {
    std::string class_name;  // "Accuracy", "SparseCategoricalAccuracy", ..., "Mean"
    std::string name;
    double threshold = 0.5;  // BinaryAccuracy
  };
  const std::optional<Config>& get_config() const { return config_; }

 protected:
  std::optional<Config> config_;

 private:
  detail::MetricImpl& checked_impl() const;
  std::shared_ptr<detail::MetricImpl> impl_;
};

struct MetricOptions {
  std::string name;  // empty: the Keras default name of the metric
};

// Fraction of elements where y_true == y_pred exactly (shapes equal, or differing by one trailing
// extent-1 axis).
class Accuracy : public Metric {
 public:
  explicit Accuracy(MetricOptions options = {});
};

// y_true: class indices of shape y_pred.shape[:-1] (or with a trailing 1); fraction of samples
// whose argmax over y_pred's last axis equals the label.
class SparseCategoricalAccuracy : public Metric {
 public:
  explicit SparseCategoricalAccuracy(MetricOptions options = {});
};

// y_true: one-hot targets of y_pred's shape; fraction of samples where the argmaxes agree.
class CategoricalAccuracy : public Metric {
 public:
  explicit CategoricalAccuracy(MetricOptions options = {});
};

struct BinaryAccuracyOptions {
  std::string name;  // default "binary_accuracy"
  double threshold = 0.5;
};
// Fraction of elements where (y_pred > threshold) equals y_true (0 or 1).
class BinaryAccuracy : public Metric {
 public:
  explicit BinaryAccuracy(BinaryAccuracyOptions options = {});
};

// The mean of every value passed to update_state (the loss tracker of fit()).
class Mean : public Metric {
 public:
  explicit Mean(MetricOptions options = {});
};

// A metric by Keras name: "accuracy"/"acc" resolve by the loss, as in Keras compile():
// sparse_categorical_crossentropy -> SparseCategoricalAccuracy, categorical_crossentropy ->
// CategoricalAccuracy, binary_crossentropy -> BinaryAccuracy, any other loss -> Accuracy; the
// metric keeps the name it was asked for ("accuracy" or "acc"). Also "sparse_categorical_accuracy",
// "categorical_accuracy", "binary_accuracy". Unknown names throw ValueError listing the valid ones.
Metric get(std::string_view name, std::string_view loss_name = {});

}  // namespace mixprec::metrics

#pragma GCC visibility pop
