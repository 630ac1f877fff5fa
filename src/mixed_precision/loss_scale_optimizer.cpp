// LossScaleOptimizer: an OptimizerImpl that wraps another one and a LossScale (loss_scale.h).
//
// CPU tensors: the host LossScale decides each step (as before). CUDA tensors: the state moves to
// the device on first use (cuda::DeviceLossScale, seeded from the host state) and every step stays
// there: the scaled loss reads the device scale, the unscale pass sets the device found_inf flag,
// the inner optimizer's update kernels read it and skip, and a one-thread kernel applies the
// loss-scale rule. The host LossScale is then a mirror, refreshed (with one synchronisation) only
// when an accessor or get_state reads it after a step.
#include "mixprec/mixed_precision/loss_scale_optimizer.h"

#include <cmath>
#include <memory>
#include <string>

#include "backend/cuda/optimizers.h"
#include "core/tensor_impl.h"
#include "mixed_precision/loss_scale.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec::mixed_precision {

namespace {

using detail::LossScale;
using detail::LossScaleState;
using detail::StepOutcome;

constexpr const char* kName = "loss_scale_optimizer";

class LossScaleOptimizerImpl final : public optimizers::detail::OptimizerImpl {
 public:
  LossScaleOptimizerImpl(optimizers::Optimizer inner, const LossScaleOptions& options)
      : inner_(std::move(inner)), loss_scale_(options) {}

  std::string name() const override { return kName; }
  optimizers::detail::OptimizerImpl& inner() const { return *inner_.impl(); }
  const optimizers::Optimizer& inner_handle() const { return inner_; }
  // The state, read back from the device when steps ran there since the last read (synchronises).
  const LossScale& loss_scale() const {
    if (device_state_.defined() && host_stale_) {
      loss_scale_.set_state(detail::from_device_state(cuda::read_loss_scale_state(device_state_)));
      host_stale_ = false;
    }
    return loss_scale_;
  }
  bool dynamic() const { return loss_scale_.dynamic(); }
  std::int64_t growth_steps() const { return loss_scale_.growth_steps(); }

  Tensor scaled_loss(const Tensor& loss) {
    if (!loss.device().is_cuda()) {
      require_host_state(loss.device(), "get_scaled_loss");
      return mul(loss, loss_scale_.scale());
    }
    // A 0-d float32 alias of the device scale: mul reads the value current on the stream, and the
    // backward pass (queued before this step's scale update) reads the same value.
    const Tensor scale = cuda::loss_scale_view(device_state(loss.device()));
    switch (loss.dtype()) {
      case DType::float32: return mul(loss, scale);
      case DType::float64: return mul(loss, cast(scale, DType::float64));
      default:
        // 16-bit: scaled in float32 and rounded once (the scale itself may exceed float16's range).
        return cast(mul(cast(loss, DType::float32), scale), loss.dtype());
    }
  }

  std::vector<Tensor> unscale(const std::vector<Tensor>& grads) {
    const Device device = device_of(grads);
    if (device.is_cuda()) {
      const Tensor& state = device_state(device);
      std::vector<Tensor> result = cuda::unscale_and_check(
          device, grads, static_cast<const float*>(state.data_ptr()), cuda::found_inf_flag(state));
      remember(result);
      return result;
    }
    require_host_state(device, "get_unscaled_gradients");
    detail::UnscaledGradients result = loss_scale_.unscale_and_check(grads);
    checked_.assign(result.gradients.size(), {});
    for (std::size_t i = 0; i < result.gradients.size(); ++i) {
      if (result.gradients[i].defined()) checked_[i] = result.gradients[i].impl_ptr();
    }
    checked_outcome_ = result.outcome;
    return std::move(result.gradients);
  }

  void apply_gradients(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) override {
    inner().check_arguments(grads, variables);
    if (!variables.empty() && variables[0].device().is_cuda()) {
      apply_on_device(grads, variables);
      return;
    }
    if (!variables.empty()) require_host_state(variables[0].device(), "apply_gradients");
    const StepOutcome outcome = outcome_of(grads);
    checked_.clear();
    if (outcome == StepOutcome::finite) {
      inner().apply_gradients(grads, variables);
    } else {
      inner().skip_step(grads, variables);
    }
    loss_scale_.update(outcome);
  }

  void skip_step(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables) override {
    inner().skip_step(grads, variables);
  }
  void apply_gradients_unless_found_inf(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                        const int*) override {
    throw ValueError(
        "LossScaleOptimizer cannot be the inner optimizer of another LossScaleOptimizer");
  }
  void build(const std::vector<Tensor>& variables) override { inner().build(variables); }
  void check_arguments(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) const override {
    inner().check_arguments(grads, variables);
  }
  std::int64_t iterations() const override { return inner().iterations(); }
  double learning_rate() const override { return inner().learning_rate(); }
  void set_learning_rate(const optimizers::LearningRate& learning_rate) override {
    inner().set_learning_rate(learning_rate);
  }
  bool learning_rate_is_schedule() const override { return inner().learning_rate_is_schedule(); }

  optimizers::OptimizerState get_state() const override {
    const LossScaleState& s = loss_scale().state();
    optimizers::OptimizerState state;
    state.name = kName;
    state.iterations = inner().iterations();
    state.scalars = {{"loss_scale", s.scale},
                     {"dynamic_counter", static_cast<double>(s.counter)},
                     {"skipped_steps", static_cast<double>(s.skipped)},
                     {"consecutive_skipped_steps", static_cast<double>(s.consecutive_skipped)},
                     {"last_step_skipped", s.last_skipped ? 1.0 : 0.0}};
    state.inner.push_back(inner().get_state());
    return state;
  }

  void set_state(const optimizers::OptimizerState& state) override {
    const std::string who = "LossScaleOptimizer: set_state";
    if (state.name != kName) {
      throw ValueError(who + ": the state was exported by a '" + state.name +
                       "' optimizer, not a LossScaleOptimizer; restore it into the inner "
                       "optimizer instead");
    }
    if (state.inner.size() != 1 || !state.slots.empty()) {
      throw ValueError(who +
                       ": expected the inner optimizer's state and no slots of its own, got " +
                       std::to_string(state.inner.size()) + " inner states and " +
                       std::to_string(state.slots.size()) + " slots");
    }
    if (state.iterations != state.inner[0].iterations) {
      throw ValueError(who + ": iterations " + std::to_string(state.iterations) +
                       " disagree with the inner optimizer's " +
                       std::to_string(state.inner[0].iterations));
    }
    LossScaleState restored;
    restored.scale = scalar(state, "loss_scale");
    restored.counter = count(state, "dynamic_counter");
    restored.skipped = count(state, "skipped_steps");
    restored.consecutive_skipped = count(state, "consecutive_skipped_steps");
    restored.last_skipped = count(state, "last_step_skipped") != 0;
    if (state.scalars.size() != 5) {
      throw ValueError(who + ": the state has " + std::to_string(state.scalars.size()) +
                       " scalars, expected exactly loss_scale, dynamic_counter, skipped_steps, "
                       "consecutive_skipped_steps and last_step_skipped");
    }
    // Validate our part on a copy first, so that a bad state changes nothing.
    LossScale updated = loss_scale_;
    updated.set_state(restored);
    inner().set_state(state.inner[0]);
    loss_scale_ = updated;
    if (device_state_.defined()) {
      cuda::set_loss_scale_state(device_state_, detail::to_device_state(restored));
      host_stale_ = false;
    }
    checked_.clear();
  }

 private:
  static double scalar(const optimizers::OptimizerState& state, const char* key) {
    const auto it = state.scalars.find(key);
    if (it == state.scalars.end()) {
      throw ValueError(std::string("LossScaleOptimizer: set_state: the state has no '") + key +
                       "' scalar");
    }
    return it->second;
  }
  static std::int64_t count(const optimizers::OptimizerState& state, const char* key) {
    const double value = scalar(state, key);
    if (!(value >= 0.0 && value <= 9.0e15 && std::floor(value) == value)) {
      throw ValueError(std::string("LossScaleOptimizer: set_state: '") + key +
                       "' must be a non-negative integer, got " + std::to_string(value));
    }
    return static_cast<std::int64_t>(value);
  }

  // The device of the defined tensors (the first one's; the CUDA entry points reject others);
  // with none defined, the device the state lives on.
  Device device_of(const std::vector<Tensor>& tensors) const {
    for (const Tensor& t : tensors) {
      if (t.defined()) return t.device();
    }
    return device_state_.defined() ? device_state_.device() : Device::cpu();
  }

  // The device state on `device`, created on first use from the host state.
  const Tensor& device_state(Device device) {
    if (!device_state_.defined()) {
      device_state_ =
          cuda::make_loss_scale_state(device, detail::to_device_state(loss_scale_.state()));
      host_stale_ = false;
    } else if (!(device_state_.device() == device)) {
      throw DeviceError("LossScaleOptimizer: its loss-scale state is on " +
                        device_state_.device().to_string() + " but this step's tensors are on " +
                        device.to_string() +
                        "; train with one optimizer per device (or keep the model on one device)");
    }
    return device_state_;
  }

  // CPU steps use the host state, which is stale once the state lives on a GPU.
  void require_host_state(Device device, const char* what) const {
    if (device_state_.defined()) {
      throw DeviceError(std::string("LossScaleOptimizer: ") + what + " got tensors on " +
                        device.to_string() + " but the loss-scale state is on " +
                        device_state_.device().to_string() +
                        "; keep the loss, gradients and variables on the model's device");
    }
  }

  // The CUDA step: the finiteness verdict is the device flag (set by get_unscaled_gradients for
  // these very tensors, or by a check here), the inner update skips on it and the loss-scale rule
  // runs on the device. Nothing waits for the GPU.
  void apply_on_device(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables) {
    const Device device = variables[0].device();
    const Tensor& state = device_state(device);
    int* found_inf = cuda::found_inf_flag(state);
    if (!same_as_checked(grads)) cuda::check_finite(device, grads, found_inf);
    checked_.clear();
    inner().apply_gradients_unless_found_inf(grads, variables, found_inf);
    cuda::update_loss_scale_state(state, loss_scale_.mode(), loss_scale_.growth_steps());
    host_stale_ = true;
  }

  void remember(const std::vector<Tensor>& gradients) {
    checked_.assign(gradients.size(), {});
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i].defined()) checked_[i] = gradients[i].impl_ptr();
    }
  }

  // Whether `grads` are exactly the tensors get_unscaled_gradients returned last.
  bool same_as_checked(const std::vector<Tensor>& grads) const {
    bool same = checked_.size() == grads.size();
    for (std::size_t i = 0; same && i < grads.size(); ++i) {
      same = grads[i].defined() ? checked_[i].lock() == grads[i].impl_ptr() : checked_[i].expired();
    }
    return same;
  }

  // The outcome remembered by get_unscaled_gradients when `grads` are exactly the tensors it
  // returned; otherwise the gradients are checked here.
  StepOutcome outcome_of(const std::vector<Tensor>& grads) const {
    if (same_as_checked(grads)) return checked_outcome_;
    for (const Tensor& g : grads) {
      if (g.defined() && !all_finite(g)) return StepOutcome::non_finite;
    }
    return StepOutcome::finite;
  }

  optimizers::Optimizer inner_;
  // The host state; a mirror of device_state_ once that exists (refreshed by loss_scale()).
  mutable LossScale loss_scale_;
  // The cuda::DeviceLossScale of CUDA training (undefined until the first CUDA tensor is seen).
  Tensor device_state_;
  mutable bool host_stale_ = false;  // steps ran on the device since loss_scale_ was refreshed
  // The gradients get_unscaled_gradients returned last (weak: the caller owns them).
  std::vector<std::weak_ptr<TensorImpl>> checked_;
  StepOutcome checked_outcome_ = StepOutcome::finite;
};

std::shared_ptr<LossScaleOptimizerImpl> make_impl(optimizers::Optimizer inner,
                                                  const LossScaleOptions& options) {
  if (!inner.defined()) {
    throw ValueError(
        "LossScaleOptimizer: the inner optimizer is undefined; pass one, e.g. "
        "LossScaleOptimizer(mixprec::optimizers::RMSprop())");
  }
  if (as_loss_scale_optimizer(inner)) {
    throw ValueError(
        "LossScaleOptimizer: the inner optimizer is already a LossScaleOptimizer; wrap the plain "
        "optimizer once");
  }
  return std::make_shared<LossScaleOptimizerImpl>(std::move(inner), options);
}

}  // namespace

LossScaleOptimizer::LossScaleOptimizer(optimizers::Optimizer inner, LossScaleOptions options)
    : Optimizer(make_impl(std::move(inner), options)) {
  impl()->options = options;
}

LossScaleOptimizer::LossScaleOptimizer(std::shared_ptr<optimizers::detail::OptimizerImpl> impl)
    : Optimizer(std::move(impl)) {}

namespace {
LossScaleOptimizerImpl& self(const LossScaleOptimizer& optimizer) {
  // Every LossScaleOptimizer handle is made by make_impl or as_loss_scale_optimizer.
  return static_cast<LossScaleOptimizerImpl&>(*optimizer.impl());
}
}  // namespace

Tensor LossScaleOptimizer::get_scaled_loss(const Tensor& loss) const {
  if (!loss.defined())
    throw ValueError("LossScaleOptimizer: get_scaled_loss got an undefined loss");
  if (!is_floating(loss.dtype())) {
    throw DTypeError("LossScaleOptimizer: get_scaled_loss expects a floating-point loss, got " +
                     std::string(dtype_name(loss.dtype())) + " " + loss.shape().to_string());
  }
  return self(*this).scaled_loss(loss);
}

std::vector<Tensor> LossScaleOptimizer::get_unscaled_gradients(
    const std::vector<Tensor>& grads) const {
  return self(*this).unscale(grads);
}

double LossScaleOptimizer::loss_scale() const { return self(*this).loss_scale().scale(); }
bool LossScaleOptimizer::dynamic() const { return self(*this).dynamic(); }
std::int64_t LossScaleOptimizer::dynamic_growth_steps() const { return self(*this).growth_steps(); }
std::int64_t LossScaleOptimizer::dynamic_counter() const {
  return self(*this).loss_scale().state().counter;
}
std::int64_t LossScaleOptimizer::skipped_steps() const {
  return self(*this).loss_scale().state().skipped;
}
std::int64_t LossScaleOptimizer::consecutive_skipped_steps() const {
  return self(*this).loss_scale().state().consecutive_skipped;
}
bool LossScaleOptimizer::last_step_skipped() const {
  return self(*this).loss_scale().state().last_skipped;
}
optimizers::Optimizer LossScaleOptimizer::inner_optimizer() const {
  return self(*this).inner_handle();
}

std::optional<LossScaleOptimizer> as_loss_scale_optimizer(const optimizers::Optimizer& optimizer) {
  if (!optimizer.defined() || !dynamic_cast<LossScaleOptimizerImpl*>(optimizer.impl().get())) {
    return std::nullopt;
  }
  return LossScaleOptimizer(optimizer.impl());
}

}  // namespace mixprec::mixed_precision
