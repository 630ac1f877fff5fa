// Learning-rate schedules (keras.optimizers.schedules): functions of the optimizer's iteration
// count, evaluated once per apply_gradients at the iteration count before that step (the first step
// sees step 0, as in Keras). An optimizer's `learning_rate` option takes a number or any schedule:
//   mp::optimizers::SGD({.learning_rate = mp::optimizers::schedules::ExponentialDecay{
//       .initial_learning_rate = 0.1, .decay_steps = 1000, .decay_rate = 0.96}});
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <variant>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::optimizers {

namespace schedules {

// lr(step) = learning_rate.
struct ConstantSchedule {
  double learning_rate = 0.001;
  double operator()(std::int64_t step) const;
};

// lr(step) = initial_learning_rate * decay_rate ^ (step / decay_steps); with staircase the exponent
// is floor(step / decay_steps). decay_steps must be positive, decay_rate positive.
struct ExponentialDecay {
  double initial_learning_rate = 0.0;
  std::int64_t decay_steps = 0;
  double decay_rate = 0.0;
  bool staircase = false;
  double operator()(std::int64_t step) const;
};

// Keras 3 CosineDecay, with an optional linear warm-up. Without warmup_target (nullopt):
//   s = min(step, decay_steps);
//   lr(step) = initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) +
//   alpha)
// (alpha is the final learning rate as a fraction of the initial one; warmup_steps is unused).
// With warmup_target: s = min(step, warmup_steps + decay_steps);
//   s < warmup_steps: lr = initial_learning_rate
//                          + (warmup_target - initial_learning_rate) * s / warmup_steps
//   otherwise:        lr = warmup_target * ((1 - alpha) * 0.5 * (1 + cos(pi * (s - warmup_steps)
//                                                        / decay_steps)) + alpha)
// so the rate climbs linearly from initial_learning_rate (often 0) to warmup_target over
// warmup_steps steps, then decays from warmup_target to alpha * warmup_target over decay_steps.
// decay_steps must be positive, warmup_steps non-negative.
struct CosineDecay {
  double initial_learning_rate = 0.0;
  std::int64_t decay_steps = 0;
  double alpha = 0.0;
  std::optional<double> warmup_target;
  std::int64_t warmup_steps = 0;
  double operator()(std::int64_t step) const;
};

}  // namespace schedules

// Anything callable as lr(step); the three schedules above and user lambdas qualify.
template <typename S>
concept LearningRateSchedule = requires(const S& schedule, std::int64_t step) {
  { schedule(step) } -> std::convertible_to<double>;
};

// The value of an optimizer's learning_rate option: a constant or a schedule. Construction
// evaluates the schedule at step 0, so an invalid schedule (decay_steps = 0, a negative or
// non-finite rate) throws ValueError when the optimizer is made, not in the middle of training.
class LearningRate {
 public:
  LearningRate(double value);  // NOLINT: implicit, so that {.learning_rate = 0.01} reads naturally
  template <LearningRateSchedule S>
  requires(!std::convertible_to<S, double> && !std::same_as<S, LearningRate>) LearningRate(
      S schedule)  // NOLINT: implicit, so that {.learning_rate = ExponentialDecay{...}}
      : schedule_(std::move(schedule)), constant_(false) {
    if constexpr (std::same_as<S, schedules::ConstantSchedule> ||
                  std::same_as<S, schedules::ExponentialDecay> ||
                  std::same_as<S, schedules::CosineDecay>) {
      config_ = schedule;
    }
    (void)(*this)(0);
  }

  // The learning rate at `step` (the optimizer's iteration count); throws ValueError when the
  // schedule returns a negative or non-finite value.
  double operator()(std::int64_t step) const;
  bool is_constant() const { return constant_; }
  // Keras get_config(): the constant, or the built-in schedule this rate was made from;
  // std::monostate for a custom schedule (a function, which a saved config cannot describe).
  using Config = std::variant<std::monostate, double, schedules::ConstantSchedule,
                              schedules::ExponentialDecay, schedules::CosineDecay>;
  const Config& get_config() const { return config_; }

 private:
  std::function<double(std::int64_t)> schedule_;
  bool constant_ = true;
  Config config_;
};

}  // namespace mixprec::optimizers

#pragma GCC visibility pop
