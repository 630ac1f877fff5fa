// compile(), the training step shared by fit() and train_on_batch(), and Scores.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/models/model.h"
#include "mixprec/models/tensor_core_advice.h"
#include "mixprec/ops.h"
#include "mixprec/optimizers/rmsprop.h"
#include "models/model_impl.h"
#include "models/training_state.h"

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

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + t.shape().to_string();
}

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
  switch (resolve_verbosity(verbose)) {
    case Verbosity::progress_bar:
      progress.emplace(callbacks::ProgressBarOptions{.style = callbacks::ProgressStyle::bar});
      break;
    case Verbosity::one_line_per_epoch:
      progress.emplace(callbacks::ProgressBarOptions{.style = callbacks::ProgressStyle::line});
      break;
    default: break;
  }
  return progress;
}

void check_output_dtypes(const Model& model, TrainingState& state) {
  ModelImpl& impl = model.model_impl();
  if (!impl.has_graph()) return;  // an unbuilt Sequential: checked at its first step
  state.outputs_checked = true;
  if (!state.mixed_policy) return;
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

void reset_metrics(TrainingState& state) {
  state.loss_tracker.reset();
  for (metrics::Metric& m : state.metrics) m.reset_state();
}

std::vector<std::pair<std::string, double>> metric_results(const TrainingState& state) {
  std::vector<std::pair<std::string, double>> out;
  out.reserve(1 + state.metrics.size());
  out.emplace_back("loss", state.loss_tracker.result());
  for (const metrics::Metric& m : state.metrics) out.emplace_back(m.name(), m.result());
  return out;
}

Device model_device(const Model& model) {
  const std::vector<Tensor> variables = model.variables();
  return variables.empty() ? default_device() : variables.front().device();
}

void train_step(const Model& model, TrainingState& state, const Tensor& x_batch,
                const Tensor& y_batch, std::optional<std::vector<Tensor>>& variables,
                StepPosition position) {
  // After the first step, the device comes from the variable list fit() keeps (no walk over
  // the layers every step).
  const Device device =
      variables && !variables->empty() ? variables->front().device() : model_device(model);
  const Tensor x = x_batch.to(device), y = y_batch.to(device);
  const Tensor y_pred = model(x, CallOptions{.training = true});
  if (!state.outputs_checked) check_output_dtypes(model, state);
  // Frozen layers are not in this list, so no gradient is computed for them. Listed after the
  // first call, which builds an unbuilt Sequential.
  if (!variables) variables = model.trainable_variables();
  const Tensor loss = batch_loss(state, y, y_pred);

  // Host synchronisation rule (training_state.h, LossTracker): on a CUDA device nothing below
  // reads a value back per step; the loss-scale state is read every kStuckScaleCheckSteps steps.
  const bool on_gpu = device.is_cuda();
  bool stepped = false;
  double scale = 0.0;  // the loss scale this step ran with (CPU only: reading it syncs a GPU)
  if (!variables->empty()) {
    std::vector<Tensor> grads;
    if (state.loss_scale) {
      const mixed_precision::LossScaleOptimizer& lso = *state.loss_scale;
      if (!on_gpu) scale = lso.loss_scale();
      grads = lso.get_unscaled_gradients(grad(lso.get_scaled_loss(loss), *variables));
    } else {
      grads = grad(loss, *variables);
    }
    state.optimizer.apply_gradients(grads, *variables);
    if (state.keep_last_gradients) state.last_gradients = grads;
    stepped = true;
  }

  {
    NoGradScope no_grad;
    state.loss_tracker.add(loss, x.dim(0));
    if (!state.metrics.empty()) {
      const Tensor predictions = y_pred.detach();
      for (metrics::Metric& m : state.metrics) m.update_state(y, predictions);
    }
  }

  if (!stepped || !state.loss_scale) return;
  // Halving cannot help once a dynamic scale is at 1, nor ever for a fixed scale: a run of
  // skipped steps there means training makes no progress.
  const mixed_precision::LossScaleOptimizer& lso = *state.loss_scale;
  if (on_gpu) {
    // The GPU keeps the count of consecutive skipped steps itself; read it (and the scale) every
    // kStuckScaleCheckSteps steps. A dynamic scale halves on each skipped step, so a run of
    // kStuckScaleSteps skips that ends at scale 1 includes the ~15 halvings from 2^15: the error
    // may come up to that many steps sooner than on the CPU, and up to kStuckScaleCheckSteps later.
    if (++state.steps_since_scale_check < kStuckScaleCheckSteps) return;
    state.steps_since_scale_check = 0;
    scale = lso.loss_scale();
    if (lso.consecutive_skipped_steps() < kStuckScaleSteps || !(scale <= 1.0 || !lso.dynamic())) {
      return;
    }
  } else {
    if (!(lso.last_step_skipped() && (scale <= 1.0 || !lso.dynamic()))) {
      state.skipped_at_floor = 0;
      return;
    }
    if (++state.skipped_at_floor < kStuckScaleSteps) return;
    state.skipped_at_floor = 0;
  }
  const std::string where = position.epoch > 0 ? "fit(), epoch " + std::to_string(position.epoch) +
                                                     ", step " + std::to_string(position.step)
                                               : std::string("train_on_batch()");
  char scale_text[32];
  std::snprintf(scale_text, sizeof scale_text, "%.0f", scale);
  const std::string stuck =
      scale <= 1.0 ? std::string("the loss scale has been 1")
                   : "the fixed loss scale of " + std::string(scale_text) + " has been in place";
  throw Error("model '" + model.name() + "': " + where + ": " + stuck + " for " +
              std::to_string(kStuckScaleSteps) +
              " consecutive steps and every one had Inf/NaN gradients, so no step was applied; " +
              diagnose_non_finite(model, state, x, y));
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
}  // namespace

void Model::compile(CompileOptions options) {
  auto state = std::make_shared<models::TrainingState>();
  state->options = options;

  if (std::holds_alternative<std::string>(options.loss)) {
    state->loss = losses::get(std::get<std::string>(options.loss));
  } else {
    state->loss = std::get<losses::Loss>(options.loss);
    if (!state->loss.defined()) {
      throw ValueError("model '" + name() + "': compile() got an undefined Loss; pass a name " +
                       "(\"sparse_categorical_crossentropy\") or a loss object");
    }
  }

  std::vector<std::string> names{"loss"};
  for (std::size_t i = 0; i < options.metrics.size(); ++i) {
    auto& entry = options.metrics[i];
    metrics::Metric m = std::holds_alternative<std::string>(entry)
                            ? metrics::get(std::get<std::string>(entry), state->loss.name())
                            : std::get<metrics::Metric>(entry);
    if (!m.defined()) {
      throw ValueError("model '" + name() + "': compile() metric " + std::to_string(i) +
                       " is an undefined Metric; pass a name (\"accuracy\") or a metric object");
    }
    for (const std::string& n : names) {
      if (n == m.name()) {
        throw ValueError("model '" + name() + "': compile() got two metrics named '" + n +
                         "' (\"loss\" is taken by the loss); give one a different name");
      }
    }
    names.push_back(m.name());
    state->metrics.push_back(std::move(m));
  }

  optimizers::Optimizer optimizer =
      options.optimizer.defined() ? options.optimizer : optimizers::RMSprop();
  // Keras: under mixed_float16 small gradients underflow in float16 without loss scaling, so
  // compile() wraps the optimizer; mixed_bfloat16 has float32's exponent range and needs none.
  if (models::uses_policy(*this, "mixed_float16") &&
      !mixed_precision::as_loss_scale_optimizer(optimizer)) {
    optimizer = mixed_precision::LossScaleOptimizer(optimizer);
  }
  state->optimizer = optimizer;
  state->loss_scale = mixed_precision::as_loss_scale_optimizer(optimizer);
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
  models::reset_metrics(state);
  std::optional<std::vector<Tensor>> variables;
  models::train_step(*this, state, x, y, variables, {});
  return Scores{models::metric_results(state)};
}

}  // namespace mixprec
