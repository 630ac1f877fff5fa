// LossScaleOptimizer: an OptimizerImpl that wraps another one and a LossScale (loss_scale.h).
//
// One path for every device: the state lives on the tensors' device (host memory on the CPU); the
// scaled loss reads its scale, the unscale pass (or a check) sets its found_inf flag, the inner
// optimizer's update reads the flag and skips, and the loss-scale rule updates the state. On a GPU
// none of this waits for the device; the accessors read the state back (a synchronisation).
#include "mixprec/mixed_precision/loss_scale_optimizer.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "mixprec/error.h"
#include "optimizers/loss_scale.h"
#include "optimizers/loss_scale_agreement.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec::mixed_precision {

namespace {

using optimizers::detail::LossScale;
using optimizers::detail::LossScaleState;

constexpr const char* kName = "loss_scale_optimizer";

// A value as messages show it: %g (1e-50, 1e+40; std::to_string would print 0.000000 and 41
// digits).
std::string shown_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

class LossScaleOptimizerImpl final : public optimizers::detail::OptimizerImpl {
 public:
  LossScaleOptimizerImpl(optimizers::Optimizer inner, const LossScaleOptions& options)
      : inner_(std::move(inner)), loss_scale_(options) {}

  std::string name() const override { return kName; }
  optimizers::detail::OptimizerImpl& inner() const { return *inner_.impl(); }
  const optimizers::Optimizer& inner_handle() const { return inner_; }
  const LossScale& loss_scale() const { return loss_scale_; }

  Tensor scaled_loss(const Tensor& loss) { return loss_scale_.scaled_loss(loss); }
  // The found_inf flag where the state lives (loss_scale_agreement.h).
  Tensor found_inf_flag() { return loss_scale_.found_inf(loss_scale_.device()); }

  // The unscaled gradients and the number of the check whose verdict the state now holds.
  std::pair<std::vector<Tensor>, std::uint64_t> unscale(const std::vector<Tensor>& grads) {
    std::vector<Tensor> result = loss_scale_.unscale_and_check(grads);
    return {std::move(result), ++checks_};
  }

  // The step: the verdict is the state's found_inf flag, set by the unscale pass numbered
  // `check` when that is the last one (and it was given these gradients), or by a check here.
  void apply(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables,
             std::optional<std::uint64_t> check) {
    inner().check_arguments(grads, variables);
    const Device device = variables.empty() ? loss_scale_.device() : variables[0].device();
    if (!(check && *check == checks_)) {
      loss_scale_.check_finite(grads, device);
      ++checks_;
    }
    inner().apply_gradients_unless_found_inf(grads, variables, loss_scale_.found_inf(device));
    loss_scale_.step(device);
    ++checks_;  // the rule cleared the flag: no earlier verdict holds any more
  }

  void apply_gradients(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) override {
    apply(grads, variables, std::nullopt);
  }
  void apply_gradients_unless_found_inf(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                        const Tensor&) override {
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
  void exclude_from_weight_decay(const std::vector<Tensor>& var_list,
                                 const std::vector<std::string>& var_names) override {
    inner().exclude_from_weight_decay(var_list, var_names);
  }
  std::vector<std::string> weight_decay_excluded_names() const override {
    return inner().weight_decay_excluded_names();
  }
  // The loss-scale state, its checks and its rule live on the state's device: only the inner
  // optimizer can stand in the way of a replay.
  std::string graph_replay_obstacle() const override { return inner().graph_replay_obstacle(); }
  void set_iterations(std::int64_t iterations) override { inner().set_iterations(iterations); }

  optimizers::OptimizerState get_state() const override {
    const LossScaleState s = loss_scale_.state();
    optimizers::OptimizerState state;
    state.name = kName;
    state.iterations = inner().iterations();
    state.scalars = {{"loss_scale", static_cast<double>(s.scale)},
                     {"dynamic_counter", static_cast<double>(s.counter)},
                     {"skipped_steps", static_cast<double>(s.skipped)},
                     {"consecutive_skipped_steps", static_cast<double>(s.consecutive_skipped)},
                     {"last_step_skipped", s.last_skipped != 0 ? 1.0 : 0.0}};
    state.inner.push_back(inner().get_state());
    return state;
  }

  void set_state(const optimizers::OptimizerState& state) override;

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
                       "' must be a non-negative integer, got " + shown_number(value));
    }
    return static_cast<std::int64_t>(value);
  }

  optimizers::Optimizer inner_;
  LossScale loss_scale_;
  // Numbers the checks that write the found_inf flag: an UnscaledGradients carrying the current
  // number holds the verdict the flag still has.
  std::uint64_t checks_ = 0;
};

void LossScaleOptimizerImpl::set_state(const optimizers::OptimizerState& state) {
  const std::string who = "LossScaleOptimizer: set_state";
  if (state.name != kName) {
    throw ValueError(who + ": the state was exported by a '" + state.name +
                     "' optimizer, not a LossScaleOptimizer; restore it into the inner "
                     "optimizer instead");
  }
  if (state.inner.size() != 1 || !state.slots.empty()) {
    throw ValueError(who + ": expected the inner optimizer's state and no slots of its own, got " +
                     std::to_string(state.inner.size()) + " inner states and " +
                     std::to_string(state.slots.size()) + " slots");
  }
  if (state.iterations != state.inner[0].iterations) {
    throw ValueError(who + ": iterations " + std::to_string(state.iterations) +
                     " disagree with the inner optimizer's " +
                     std::to_string(state.inner[0].iterations));
  }
  const double scale = scalar(state, "loss_scale");
  // Out of range is an error, never clamped: a restored run continues with the scale it had.
  if (!(std::isfinite(scale) && scale > 0.0 && scale <= 0x1p127)) {
    throw ValueError(who + ": loss_scale must be positive and at most 2^127, got " +
                     shown_number(scale));
  }
  LossScaleState restored;
  restored.scale = static_cast<float>(scale);
  restored.counter = count(state, "dynamic_counter");
  restored.skipped = count(state, "skipped_steps");
  restored.consecutive_skipped = count(state, "consecutive_skipped_steps");
  restored.last_skipped = count(state, "last_step_skipped") != 0 ? 1 : 0;
  if (state.scalars.size() != 5) {
    throw ValueError(who + ": the state has " + std::to_string(state.scalars.size()) +
                     " scalars, expected exactly loss_scale, dynamic_counter, skipped_steps, "
                     "consecutive_skipped_steps and last_step_skipped");
  }
  // Validate our part on a copy first, so that a bad state changes nothing.
  LossScale validated = loss_scale_;
  validated.set_state(restored);
  inner().set_state(state.inner[0]);
  loss_scale_.set_state(restored);
  ++checks_;
}

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

LossScaleOptimizerImpl& self(const LossScaleOptimizer& optimizer) {
  // Every LossScaleOptimizer handle is made by make_impl or as_loss_scale_optimizer.
  return static_cast<LossScaleOptimizerImpl&>(*optimizer.impl());
}

}  // namespace

LossScaleOptimizer::LossScaleOptimizer(optimizers::Optimizer inner, LossScaleOptions options)
    : Optimizer(make_impl(std::move(inner), options)) {
  impl()->options = options;
}

LossScaleOptimizer::LossScaleOptimizer(std::shared_ptr<optimizers::detail::OptimizerImpl> impl)
    : Optimizer(std::move(impl)) {}

Tensor LossScaleOptimizer::get_scaled_loss(const Tensor& loss) const {
  if (!loss.defined())
    throw ValueError("LossScaleOptimizer: get_scaled_loss got an undefined loss");
  if (!is_floating(loss.dtype())) {
    throw DTypeError("LossScaleOptimizer: get_scaled_loss expects a floating-point loss, got " +
                     std::string(dtype_name(loss.dtype())) + " " + loss.shape().to_string());
  }
  return self(*this).scaled_loss(loss);
}

UnscaledGradients LossScaleOptimizer::get_unscaled_gradients(
    const std::vector<Tensor>& grads) const {
  LossScaleOptimizerImpl& impl = self(*this);
  auto [gradients, check] = impl.unscale(grads);
  return UnscaledGradients(UnscaledGradients::Token{}, std::move(gradients), &impl, check);
}

void LossScaleOptimizer::apply_gradients(const UnscaledGradients& grads,
                                         const std::vector<Tensor>& variables) {
  LossScaleOptimizerImpl& impl = self(*this);
  std::optional<std::uint64_t> check;
  if (grads.issuer_ == &impl) check = grads.check_;
  impl.apply(grads.gradients(), variables, check);
}

bool LossScaleOptimizer::stuck(std::int64_t steps) const {
  return self(*this).loss_scale().stuck(steps);
}

double LossScaleOptimizer::loss_scale() const { return self(*this).loss_scale().state().scale; }
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
  return self(*this).loss_scale().state().last_skipped != 0;
}
optimizers::Optimizer LossScaleOptimizer::inner_optimizer() const {
  return self(*this).inner_handle();
}

}  // namespace mixprec::mixed_precision

namespace mixprec::optimizers::detail {

void combine_found_inf(mixed_precision::LossScaleOptimizer& optimizer,
                       const std::function<void(Tensor& flag)>& combine) {
  Tensor flag = mixed_precision::self(optimizer).found_inf_flag();
  combine(flag);
}

}  // namespace mixprec::optimizers::detail

namespace mixprec::mixed_precision {

std::optional<LossScaleOptimizer> as_loss_scale_optimizer(const optimizers::Optimizer& optimizer) {
  if (!optimizer.defined() || !dynamic_cast<LossScaleOptimizerImpl*>(optimizer.impl().get())) {
    return std::nullopt;
  }
  return LossScaleOptimizer(optimizer.impl());
}

}  // namespace mixprec::mixed_precision
