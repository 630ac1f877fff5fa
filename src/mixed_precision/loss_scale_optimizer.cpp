// LossScaleOptimizer: an OptimizerImpl that wraps another one and a LossScale (loss_scale.h).
#include "mixprec/mixed_precision/loss_scale_optimizer.h"

#include <cmath>
#include <memory>
#include <string>

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
  const LossScale& loss_scale() const { return loss_scale_; }

  std::vector<Tensor> unscale(const std::vector<Tensor>& grads) {
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

  optimizers::OptimizerState get_state() const override {
    const LossScaleState& s = loss_scale_.state();
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

  // The outcome remembered by get_unscaled_gradients when `grads` are exactly the tensors it
  // returned; otherwise the gradients are checked here.
  StepOutcome outcome_of(const std::vector<Tensor>& grads) const {
    bool same = checked_.size() == grads.size();
    for (std::size_t i = 0; same && i < grads.size(); ++i) {
      same = grads[i].defined() ? checked_[i].lock() == grads[i].impl_ptr() : checked_[i].expired();
    }
    if (same) return checked_outcome_;
    for (const Tensor& g : grads) {
      if (g.defined() && !all_finite(g)) return StepOutcome::non_finite;
    }
    return StepOutcome::finite;
  }

  optimizers::Optimizer inner_;
  LossScale loss_scale_;
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
    : Optimizer(make_impl(std::move(inner), options)) {}

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
  return mul(loss, self(*this).loss_scale().scale());
}

std::vector<Tensor> LossScaleOptimizer::get_unscaled_gradients(
    const std::vector<Tensor>& grads) const {
  return self(*this).unscale(grads);
}

double LossScaleOptimizer::loss_scale() const { return self(*this).loss_scale().scale(); }
bool LossScaleOptimizer::dynamic() const { return self(*this).loss_scale().dynamic(); }
std::int64_t LossScaleOptimizer::dynamic_growth_steps() const {
  return self(*this).loss_scale().growth_steps();
}
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
