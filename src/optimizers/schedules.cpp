// Learning-rate schedules (Keras formulas, evaluated in double).
#include "mixprec/optimizers/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "mixprec/error.h"

namespace mixprec::optimizers {

namespace schedules {

namespace {
void check_decay_steps(const char* schedule, std::int64_t decay_steps) {
  if (decay_steps <= 0) {
    throw ValueError(std::string(schedule) + ": decay_steps must be positive, got " +
                     std::to_string(decay_steps));
  }
}
}  // namespace

double ConstantSchedule::operator()(std::int64_t) const { return learning_rate; }

double ExponentialDecay::operator()(std::int64_t step) const {
  check_decay_steps("ExponentialDecay", decay_steps);
  if (!(decay_rate > 0.0)) {
    throw ValueError("ExponentialDecay: decay_rate must be positive, got " +
                     std::to_string(decay_rate));
  }
  double p = static_cast<double>(step) / static_cast<double>(decay_steps);
  if (staircase) p = std::floor(p);
  return initial_learning_rate * std::pow(decay_rate, p);
}

double CosineDecay::operator()(std::int64_t step) const {
  check_decay_steps("CosineDecay", decay_steps);
  if (warmup_steps < 0) {
    throw ValueError("CosineDecay: warmup_steps must be non-negative, got " +
                     std::to_string(warmup_steps));
  }
  // The cosine factor at s steps into the decay (s in [0, decay_steps]).
  const auto decayed = [&](double s) {
    const double cosine =
        0.5 * (1.0 + std::cos(std::numbers::pi * s / static_cast<double>(decay_steps)));
    return (1.0 - alpha) * cosine + alpha;
  };
  if (!warmup_target) {
    return initial_learning_rate * decayed(static_cast<double>(std::min(step, decay_steps)));
  }
  // Keras 3: the step is capped at the end of the decay, then warm-up or decay from the target.
  const std::int64_t s = std::min(step, warmup_steps + decay_steps);
  if (s < warmup_steps) {
    const double fraction = static_cast<double>(s) / static_cast<double>(warmup_steps);
    return (*warmup_target - initial_learning_rate) * fraction + initial_learning_rate;
  }
  return *warmup_target * decayed(static_cast<double>(s - warmup_steps));
}

}  // namespace schedules

LearningRate::LearningRate(double value)
    : schedule_([value](std::int64_t) { return value; }), constant_(true), config_(value) {
  (void)(*this)(0);
}

double LearningRate::operator()(std::int64_t step) const {
  const double value = schedule_(step);
  if (!std::isfinite(value) || value < 0.0) {
    throw ValueError("learning rate " + std::string(constant_ ? "" : "schedule ") + "gives " +
                     std::to_string(value) + " at step " + std::to_string(step) +
                     "; a learning rate must be finite and non-negative");
  }
  return value;
}

}  // namespace mixprec::optimizers
