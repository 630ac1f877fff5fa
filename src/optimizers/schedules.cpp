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
  const double s = static_cast<double>(std::min(step, decay_steps));
  const double cosine =
      0.5 * (1.0 + std::cos(std::numbers::pi * s / static_cast<double>(decay_steps)));
  return initial_learning_rate * ((1.0 - alpha) * cosine + alpha);
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
