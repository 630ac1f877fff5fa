// The Metric handle, Mean and metrics::get.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "metrics/metric_config.h"
#include "metrics/metric_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/metrics.h"
#include "mixprec/ops.h"

namespace mixprec::metrics {

namespace detail {

void MetricImpl::update(const Tensor&, const Tensor&) {
  throw ValueError("metric '" + name_ +
                   "' takes a batch of values, update_state(values), not (y_true, y_pred)");
}

void MetricImpl::update_values(const Tensor&) {
  throw ValueError("metric '" + name_ + "' takes update_state(y_true, y_pred), not one tensor");
}

double MetricImpl::result() const {
  // Exact for counts: sums of whole numbers (or of float64 values) in float64.
  const double total = total_.defined() ? total_.item() : 0.0;
  return count_ > 0.0 ? total / count_ : 0.0;
}

void MetricImpl::reset() {
  count_ = 0.0;
  total_ = Tensor();
}

MetricImpl::Accumulator MetricImpl::accumulator() const {
  return {count_, total_.defined() ? total_.item() : 0.0};
}

void MetricImpl::set_accumulator(const Accumulator& sums) {
  count_ = sums.count;
  total_ = scalar(sums.total, {.dtype = DType::float64, .device = Device::cpu()});
}

void MetricImpl::add(const Tensor& total, double count) {
  // A batch on another device than the earlier ones (rare): move the accumulator along.
  if (total_.defined() && !(total_.device() == total.device())) total_ = total_.to(total.device());
  total_ = total_.defined() ? mixprec::add(total_, total) : total;
  count_ += count;
}

namespace {

// Metric::impl_ for impl_of(): the member pointer is named in an explicit instantiation (where
// access is not checked) and handed out by the friend function that instantiation defines.
struct ImplMember {
  using type = std::shared_ptr<MetricImpl> Metric::*;
  friend type member(ImplMember);
};
template <typename Tag, typename Tag::type Member>
struct ExposeMember {
  friend typename Tag::type member(Tag) { return Member; }
};
template struct ExposeMember<ImplMember, &Metric::impl_>;

class MeanImpl final : public MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  void update_values(const Tensor& values) override {
    if (!values.defined()) throw ValueError("Mean '" + name() + "': got an undefined tensor");
    if (values.dtype() == DType::bool_) {
      throw DTypeError("Mean '" + name() + "': expects numeric values, got bool " +
                       values.shape().to_string() + "; cast with .to(mixprec::kFloat32)");
    }
    add(sum(values.to(DType::float64)), static_cast<double>(values.numel()));
  }
};

}  // namespace

MetricImpl& impl_of(const Metric& metric) {
  const std::shared_ptr<MetricImpl>& impl = metric.*member(ImplMember{});
  if (!impl) throw ValueError("use of an undefined Metric (default-constructed)");
  return *impl;
}

}  // namespace detail

Metric::Metric(std::shared_ptr<detail::MetricImpl> impl) : impl_(std::move(impl)) {}

detail::MetricImpl& Metric::checked_impl() const {
  if (!impl_) {
    throw ValueError(
        "use of an undefined Metric (default-constructed); create one, e.g. "
        "mixprec::metrics::SparseCategoricalAccuracy() or mixprec::metrics::get(\"accuracy\", "
        "loss_name)");
  }
  return *impl_;
}

void Metric::update_state(const Tensor& y_true, const Tensor& y_pred) {
  NoGradScope no_grad;
  checked_impl().update(y_true, y_pred);
}
void Metric::update_state(const Tensor& values) {
  NoGradScope no_grad;
  checked_impl().update_values(values);
}
// A host number stays on the host (whatever the default device): counted without a copy.
void Metric::update_state(double value) {
  update_state(scalar(value, {.dtype = DType::float64, .device = Device::cpu()}));
}
double Metric::result() const { return checked_impl().result(); }
void Metric::reset_state() { checked_impl().reset(); }
const std::string& Metric::name() const { return checked_impl().name(); }

Mean::Mean(MetricOptions options)
    : Metric(std::make_shared<detail::MeanImpl>(options.name.empty() ? "mean" : options.name)) {
  config_ = Config{"Mean", name()};
}

Metric get(std::string_view name, std::string_view loss_name) {
  const auto lower = [](std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
  };
  const std::string key = lower(name);
  if (key == "accuracy" || key == "acc") {
    // Keras compile() resolves "accuracy" by the loss; the metric keeps the requested name.
    const std::string loss = lower(loss_name);
    MetricOptions options{.name = key};
    if (loss == "sparse_categorical_crossentropy") return SparseCategoricalAccuracy(options);
    if (loss == "categorical_crossentropy") return CategoricalAccuracy(options);
    if (loss == "binary_crossentropy") return BinaryAccuracy({.name = key});
    return Accuracy(options);
  }
  if (key == "sparse_categorical_accuracy") return SparseCategoricalAccuracy();
  if (key == "categorical_accuracy") return CategoricalAccuracy();
  if (key == "binary_accuracy") return BinaryAccuracy();
  throw ValueError("metrics::get: unknown metric '" + std::string(name) +
                   "'; valid names: accuracy (or acc), sparse_categorical_accuracy, "
                   "categorical_accuracy, binary_accuracy");
}

std::optional<Metric> from_config(const Metric::Config& config) {
  const std::string& cls = config.class_name;
  const MetricOptions named{.name = config.name};
  if (cls == "Accuracy") return Accuracy(named);
  if (cls == "SparseCategoricalAccuracy") return SparseCategoricalAccuracy(named);
  if (cls == "CategoricalAccuracy") return CategoricalAccuracy(named);
  if (cls == "Mean") return Mean(named);
  if (cls == "BinaryAccuracy")
    return BinaryAccuracy({.name = config.name, .threshold = config.threshold});
  return std::nullopt;
}

}  // namespace mixprec::metrics
