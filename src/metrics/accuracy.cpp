// Accuracy, SparseCategoricalAccuracy, CategoricalAccuracy and BinaryAccuracy: each batch adds
// (matches, comparisons) to the running ratio. The comparisons run as ops on the predictions'
// device, the same on every device: values widened to float64 (exact for every stored dtype, so
// 16-bit predictions need no cast), argmax on the stored values, and the matches counted into an
// accumulator there: no copy to the host per batch (metric_impl.h).
#include <string>
#include <vector>

#include "metrics/metric_impl.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/metrics.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec::metrics {

namespace {

using ops::describe;  // "float16 (32, 10)"

void check_defined(const std::string& metric, const Tensor& y_true, const Tensor& y_pred) {
  if (!y_true.defined() || !y_pred.defined()) {
    throw ValueError(metric + ": y_true and y_pred must both be defined tensors");
  }
}

void check_floating_pred(const std::string& metric, const Tensor& y_pred) {
  if (!is_floating(y_pred.dtype())) {
    throw DTypeError(metric + ": y_pred must be floating point, got " + describe(y_pred));
  }
}

Shape without_last(const Shape& s) {
  return Shape(std::vector<std::int64_t>(s.begin(), s.end() - (s.rank() > 0 ? 1 : 0)));
}

// Equal shapes, or one trailing extent-1 axis more or less (Keras's squeeze-or-expand).
void check_matching(const std::string& metric, const Tensor& y_true, const Tensor& y_pred) {
  const Shape& a = y_true.shape();
  const Shape& b = y_pred.shape();
  const bool ok = a == b ||
                  (a.rank() == b.rank() + 1 && a[a.rank() - 1] == 1 && without_last(a) == b) ||
                  (b.rank() == a.rank() + 1 && b[b.rank() - 1] == 1 && without_last(b) == a);
  if (!ok) {
    throw ShapeError(metric + ": y_true has shape " + a.to_string() + " but y_pred has shape " +
                     b.to_string() + "; they must match (up to one trailing axis of extent 1)");
  }
}

// (..., C) predictions: the class axis must exist and be non-empty.
void check_class_axis(const std::string& metric, const Tensor& y_pred) {
  if (y_pred.rank() < 1 || y_pred.shape()[y_pred.rank() - 1] < 1) {
    throw ShapeError(metric + ": y_pred must have a class axis last, (batch, classes), got " +
                     y_pred.shape().to_string());
  }
}

// ---- the comparisons, as ops on y_pred's device ----

// y_true where y_pred is (a batch's labels may still be on the host when a user calls
// update_state directly).
Tensor beside(const Tensor& y_true, const Tensor& y_pred) { return y_true.to(y_pred.device()); }

// (numel,) float64 values of `t`.
Tensor flat_float64(const Tensor& t) { return t.to(DType::float64).reshape(Shape{t.numel()}); }

// The number of true elements of a bool tensor, as a float64 scalar on its device.
Tensor count_true(const Tensor& matches) { return sum(matches.to(DType::float64)); }

class AccuracyImpl final : public detail::MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  void update(const Tensor& y_true, const Tensor& y_pred) override {
    check_defined(name(), y_true, y_pred);
    check_matching(name(), y_true, y_pred);
    add(count_true(equal(flat_float64(beside(y_true, y_pred)), flat_float64(y_pred))),
        static_cast<double>(y_pred.numel()));
  }
};

class SparseCategoricalAccuracyImpl final : public detail::MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  void update(const Tensor& y_true, const Tensor& y_pred) override {
    check_defined(name(), y_true, y_pred);
    check_floating_pred(name(), y_pred);
    check_class_axis(name(), y_pred);
    const Shape batch = without_last(y_pred.shape());
    std::vector<std::int64_t> with_one(batch.begin(), batch.end());
    with_one.push_back(1);
    if (y_true.shape() != batch && y_true.shape() != Shape(with_one)) {
      throw ShapeError(name() + ": y_true has shape " + y_true.shape().to_string() +
                       " but y_pred has shape " + y_pred.shape().to_string() +
                       "; expected labels of shape " + batch.to_string() + " or " +
                       Shape(with_one).to_string());
    }
    const Tensor predicted = argmax(y_pred, -1);  // int64, exact in float64
    add(count_true(equal(flat_float64(beside(y_true, y_pred)), flat_float64(predicted))),
        static_cast<double>(predicted.numel()));
  }
};

class CategoricalAccuracyImpl final : public detail::MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  void update(const Tensor& y_true, const Tensor& y_pred) override {
    check_defined(name(), y_true, y_pred);
    check_floating_pred(name(), y_pred);
    check_class_axis(name(), y_pred);
    if (y_true.shape() != y_pred.shape()) {
      throw ShapeError(name() + ": y_true has shape " + y_true.shape().to_string() +
                       " but y_pred has shape " + y_pred.shape().to_string() +
                       "; one-hot targets must have the predictions' shape");
    }
    const Tensor predicted = argmax(y_pred, -1);
    add(count_true(equal(argmax(beside(y_true, y_pred), -1), predicted)),
        static_cast<double>(predicted.numel()));
  }
};

class BinaryAccuracyImpl final : public detail::MetricImpl {
 public:
  BinaryAccuracyImpl(std::string name, double threshold)
      : MetricImpl(std::move(name)), threshold_(threshold) {}
  void update(const Tensor& y_true, const Tensor& y_pred) override {
    check_defined(name(), y_true, y_pred);
    check_floating_pred(name(), y_pred);
    check_matching(name(), y_true, y_pred);
    // (p > threshold) as 0/1, compared with the targets as float64.
    const Tensor threshold =
        scalar(threshold_, {.dtype = DType::float64, .device = y_pred.device()});
    const Tensor above = greater(flat_float64(y_pred), threshold).to(DType::float64);
    add(count_true(equal(above, flat_float64(beside(y_true, y_pred)))),
        static_cast<double>(y_pred.numel()));
  }

 private:
  double threshold_;
};

std::string or_default(const std::string& name, const char* fallback) {
  return name.empty() ? fallback : name;
}

}  // namespace

Accuracy::Accuracy(MetricOptions options)
    : Metric(std::make_shared<AccuracyImpl>(or_default(options.name, "accuracy"))) {
  config_ = Config{"Accuracy", name()};
}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(MetricOptions options)
    : Metric(std::make_shared<SparseCategoricalAccuracyImpl>(
          or_default(options.name, "sparse_categorical_accuracy"))) {
  config_ = Config{"SparseCategoricalAccuracy", name()};
}

CategoricalAccuracy::CategoricalAccuracy(MetricOptions options)
    : Metric(std::make_shared<CategoricalAccuracyImpl>(
          or_default(options.name, "categorical_accuracy"))) {
  config_ = Config{"CategoricalAccuracy", name()};
}

BinaryAccuracy::BinaryAccuracy(BinaryAccuracyOptions options)
    : Metric(std::make_shared<BinaryAccuracyImpl>(or_default(options.name, "binary_accuracy"),
                                                  options.threshold)) {
  config_ = Config{"BinaryAccuracy", name(), options.threshold};
}

}  // namespace mixprec::metrics
