// compile() (its loss-scaling rule public as compile_optimizer), train_on_batch(), Scores, and the
// pieces of training_state.h; the step itself is in train_step.cpp.
#include <unistd.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "metrics/metric_config.h"
#include "metrics/metric_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/metrics.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/models/model.h"
#include "mixprec/models/tensor_core_advice.h"
#include "mixprec/ops.h"
#include "mixprec/optimizers/rmsprop.h"
#include "models/model_impl.h"
#include "models/train_step.h"
#include "models/training_state.h"
#include "ops/checks.h"

namespace mixprec {

double Scores::at(const std::string& name) const {
  std::string names;
  for (const auto& [key, value] : values) {
    if (key == name) return value;
    names += (names.empty() ? "" : ", ") + key;
  }
  throw ValueError("Scores: no score named '" + name +
                   "'; the scores are: " + (names.empty() ? std::string("(none)") : names));
}

namespace models {

namespace {

// Policies of the model and of every layer in it, nested models included.
template <typename F>
void for_each_policy(const layers::Layer& layer, F&& f) {
  f(layer.dtype_policy());
  if (const auto* m = dynamic_cast<const ModelImpl*>(&layer.impl())) {
    for (const layers::Layer& l : m->layers()) for_each_policy(l, f);
  }
}

bool uses_policy(const Model& model, const char* name) {
  bool found = false;
  for_each_policy(model,
                  [&](const mixed_precision::Policy& p) { found = found || p.name() == name; });
  return found;
}

bool uses_mixed_policy(const Model& model) {
  bool found = false;
  for_each_policy(model, [&](const mixed_precision::Policy& p) { found = found || p.is_mixed(); });
  return found;
}

using ops::describe;  // "float16 (32, 10)"

}  // namespace

TrainingState& require_compiled(const Model& model, const char* what) {
  ModelImpl& impl = model.model_impl();
  if (!impl.training) {
    throw ValueError("model '" + model.name() + "': " + what +
                     "() needs a compiled model; call model.compile({.optimizer = ..., .loss = "
                     "\"sparse_categorical_crossentropy\", .metrics = {\"accuracy\"}}) first");
  }
  if (impl.has_graph() && (impl.inputs().size() != 1 || impl.outputs().size() != 1)) {
    throw ValueError("model '" + model.name() + "': " + what + "() supports models with one " +
                     "input and one output, this one has " + std::to_string(impl.inputs().size()) +
                     " inputs and " + std::to_string(impl.outputs().size()) +
                     " outputs; train it with a custom loop (GradientTape) instead");
  }
  return *impl.training;
}

Verbosity resolve_verbosity(Verbosity verbose) {
  if (verbose != Verbosity::automatic) return verbose;
  return ::isatty(::fileno(stdout)) ? Verbosity::progress_bar : Verbosity::one_line_per_epoch;
}

std::optional<callbacks::ProgressBar> make_progress(Verbosity verbose) {
  std::optional<callbacks::ProgressBar> progress;
  const Verbosity resolved = resolve_verbosity(verbose);
  if (resolved == Verbosity::progress_bar) {
    progress.emplace(callbacks::ProgressBarOptions{.style = callbacks::ProgressStyle::bar});
  } else if (resolved == Verbosity::one_line_per_epoch) {
    progress.emplace(callbacks::ProgressBarOptions{.style = callbacks::ProgressStyle::line});
  }
  return progress;
}

void check_output_dtypes(const Model& model, TrainingState& state) {
  ModelImpl& impl = model.model_impl();
  if (!impl.has_graph()) return;  // an unbuilt Sequential: checked at its first step
  state.outputs_checked = true;
  if (!state.mixed_policy) return;
  // A loss from logits casts them to float32 before its softmax (or reads 16-bit logits in float32,
  // SparseCategoricalCrossentropy's fused op), so 16-bit logits lose nothing the float32 island
  // would keep: PyTorch's autocast and llm.c train GPT-2 from 16-bit logits the same way.
  const auto& loss_config = state.loss.get_config();
  if (loss_config && loss_config->from_logits) return;
  for (const KerasTensor& out : impl.outputs()) {
    const DType dtype = out.dtype();
    if (!is_floating(dtype) || dtype == DType::float32) continue;
    const layers::Layer producer = out.layer();
    warn_once("model_output_not_float32/" + model.name() + "/" + out.name(),
              "model '" + model.name() + "': output '" + out.name() + "' of layer '" +
                  producer.name() + "' (" + producer.class_name() + ", policy " +
                  producer.dtype_policy().name() + ") is " + std::string(dtype_name(dtype)) +
                  ", not float32; a 16-bit output (a softmax above all) loses precision before "
                  "the float32 loss. End the model in float32: a Dense without activation "
                  "followed by Activation(\"softmax\", {.dtype = \"float32\"}), or "
                  "Activation(\"linear\", {.dtype = \"float32\"}) to cast any output");
  }
}

void check_samples(const Tensor& x, const Tensor& y, const char* what) {
  if (!x.defined() || !y.defined()) {
    throw ValueError(std::string(what) + "(): x and y must be defined tensors, got " +
                     (x.defined() ? "a defined" : "an undefined") + " x and " +
                     (y.defined() ? "a defined" : "an undefined") + " y");
  }
  if (x.rank() < 1 || y.rank() < 1) {
    throw ValueError(std::string(what) + "(): x and y need a sample axis first, got x " +
                     describe(x) + " and y " + describe(y));
  }
  if (x.dim(0) != y.dim(0)) {
    throw ValueError(std::string(what) + "(): x and y must have the same number of samples " +
                     "(first axis), got x " + x.shape().to_string() + " and y " +
                     y.shape().to_string());
  }
  if (x.dim(0) == 0) {
    throw ValueError(std::string(what) + "(): x and y have no samples (shape " +
                     x.shape().to_string() + "); pass at least one");
  }
}

Tensor batch_loss(const TrainingState& state, const Tensor& y, const Tensor& y_pred) {
  Tensor loss = state.loss(y, y_pred);
  if (!loss.defined() || loss.numel() != 1) {
    throw ValueError("loss '" + state.loss.name() + "' must return one value (the batch mean), " +
                     "got " +
                     (loss.defined() ? describe(loss) : std::string("an undefined tensor")));
  }
  if (loss.rank() != 0) loss = loss.reshape(Shape{});
  // Float32 island (DESIGN §2.3): a custom loss computed in 16 bits is widened before scaling.
  if (loss.dtype() == DType::float16 || loss.dtype() == DType::bfloat16) loss = loss.to(kFloat32);
  return loss;
}

void MetricState::reset() {
  loss.reset();
  for (metrics::Metric& m : metrics) m.reset_state();
}

void MetricState::update(const Tensor& batch_loss, std::int64_t samples, const Tensor& y,
                         const Tensor& y_pred) {
  NoGradScope no_grad;
  loss.add(batch_loss, samples);
  if (metrics.empty()) return;
  const Tensor predictions = y_pred.detach();
  for (metrics::Metric& m : metrics) m.update_state(y, predictions);
}

std::vector<std::pair<std::string, double>> MetricState::results() const {
  std::vector<std::pair<std::string, double>> out;
  out.reserve(1 + metrics.size());
  out.emplace_back("loss", loss.result());
  for (const metrics::Metric& m : metrics) out.emplace_back(m.name(), m.result());
  return out;
}

std::vector<NamedSums> MetricState::sums() const {
  std::vector<NamedSums> out;
  out.reserve(1 + metrics.size());
  out.push_back({"loss", loss.count, loss.total.defined() ? loss.total.item() : 0.0});
  for (const metrics::Metric& m : metrics) {
    const metrics::detail::MetricImpl::Accumulator a = metrics::detail::impl_of(m).accumulator();
    out.push_back({m.name(), a.count, a.total});
  }
  return out;
}

void MetricState::set_sums(const std::vector<NamedSums>& sums) {
  reset();
  if (sums.empty()) return;
  loss.count = sums[0].count;
  loss.total = scalar(sums[0].total, {.dtype = DType::float64, .device = Device::cpu()});
  for (std::size_t i = 0; i < metrics.size() && i + 1 < sums.size(); ++i) {
    metrics::detail::impl_of(metrics[i]).set_accumulator({sums[i + 1].count, sums[i + 1].total});
  }
}

Device model_device(const Model& model) {
  const std::vector<Tensor> variables = model.variables();
  return variables.empty() ? default_device() : variables.front().device();
}

}  // namespace models

// ---- the Model methods ----

namespace {
// Seed 001: on a GPU, 16-bit layers whose sizes are not multiples of 8 miss the tensor cores.
void warn_about_tensor_cores(const Model& model) {
  if (!models::model_device(model).is_cuda()) return;
  const std::vector<TensorCoreAdvice> advice = tensor_core_advice(model);
  if (advice.empty()) return;
  std::string message = "model '" + model.name() + "': tensor cores run float16/bfloat16 at full " +
                        "speed only on multiples of 8:";
  for (const TensorCoreAdvice& a : advice) message += "\n  " + a.to_string();
  log(LogLevel::warning, message);
}

losses::Loss compiled_loss(const Model& model, const CompileOptions& options) {
  if (const auto* name = std::get_if<std::string>(&options.loss)) return losses::get(*name);
  const losses::Loss loss = std::get<losses::Loss>(options.loss);
  if (!loss.defined()) {
    throw ValueError("model '" + model.name() + "': compile() got an undefined Loss; pass a " +
                     "name (\"sparse_categorical_crossentropy\") or a loss object");
  }
  return loss;
}

// A metric of the same kind, name and options as `m` with a state of its own (evaluate()'s
// counterpart of a Metric object given to compile()). Every metric the public API makes has a
// config; one without (an internal MetricImpl) is shared instead.
metrics::Metric with_own_state(const metrics::Metric& m) {
  const std::optional<metrics::Metric::Config>& c = m.get_config();
  if (!c) return m;
  return metrics::from_config(*c).value_or(m);
}

// The metrics of compile(): the training ones (the Metric objects given, so the caller's handle
// reads the training value; names resolved by the loss) and evaluate()'s, of the same kinds and
// names but with their own state. ValueError for an undefined metric or a repeated name.
void compile_metrics(const Model& model, const CompileOptions& options,
                     models::TrainingState& state) {
  std::vector<std::string> names{"loss"};
  for (std::size_t i = 0; i < options.metrics.size(); ++i) {
    const auto& entry = options.metrics[i];
    const auto* metric_name = std::get_if<std::string>(&entry);
    metrics::Metric m = metric_name ? metrics::get(*metric_name, state.loss.name())
                                    : std::get<metrics::Metric>(entry);
    if (!m.defined()) {
      throw ValueError("model '" + model.name() + "': compile() metric " + std::to_string(i) +
                       " is an undefined Metric; pass a name (\"accuracy\") or a metric object");
    }
    for (const std::string& n : names) {
      if (n == m.name()) {
        throw ValueError("model '" + model.name() + "': compile() got two metrics named '" + n +
                         "' (\"loss\" is taken by the loss); give one a different name");
      }
    }
    names.push_back(m.name());
    state.test_metrics.metrics.push_back(metric_name ? metrics::get(*metric_name, state.loss.name())
                                                     : with_own_state(m));
    state.train_metrics.metrics.push_back(std::move(m));
  }
}
}  // namespace

optimizers::Optimizer compile_optimizer(const Model& model, optimizers::Optimizer optimizer) {
  if (!optimizer.defined()) optimizer = optimizers::RMSprop();
  // Keras: under mixed_float16 small gradients underflow in float16 without loss scaling, so
  // compile() wraps the optimizer; mixed_bfloat16 has float32's exponent range and needs none.
  if (models::uses_policy(model, "mixed_float16") &&
      !mixed_precision::as_loss_scale_optimizer(optimizer)) {
    optimizer = mixed_precision::LossScaleOptimizer(optimizer);
  }
  return optimizer;
}

void Model::compile(CompileOptions options) {
  if (options.steps_per_execution < 1) {
    throw ValueError("model '" + name() + "': compile(): steps_per_execution must be >= 1, got " +
                     std::to_string(options.steps_per_execution));
  }
  auto state = std::make_shared<models::TrainingState>();
  state->options = options;
  state->loss = compiled_loss(*this, options);
  compile_metrics(*this, options, *state);
  state->optimizer = compile_optimizer(*this, options.optimizer);
  state->loss_scale = mixed_precision::as_loss_scale_optimizer(state->optimizer);
  state->mixed_policy = models::uses_mixed_policy(*this);

  model_impl().training = state;
  models::check_output_dtypes(*this, *state);
  warn_about_tensor_cores(*this);
}

optimizers::Optimizer Model::optimizer() const {
  const auto& state = model_impl().training;
  return state ? state->optimizer : optimizers::Optimizer();
}

Scores Model::train_on_batch(const Tensor& x, const Tensor& y) {
  models::TrainingState& state = models::require_compiled(*this, "train_on_batch");
  models::check_samples(x, y, "train_on_batch");
  // Keras resets the metrics so that the result describes this batch alone.
  state.train_metrics.reset();
  models::StepContext step(*this, state);
  models::train_step(step, x, y, {});
  return Scores{state.train_metrics.results()};
}

}  // namespace mixprec
