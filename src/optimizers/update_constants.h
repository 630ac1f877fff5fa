// The update rule of each optimizer for one step: the formula (kernel_math::UpdateKind) and its
// constants, computed once per step on the host in double and rounded to float once. Every device
// receives the same rule and runs the same element body (backend/kernel_math/training.h), so the
// CPU and the GPU do the same float arithmetic.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/kernel_math/training.h"

namespace mixprec::optimizers::detail {

using kernel_math::UpdateKind;
using kernel_math::UpdateRule;

// The variant follows the slots the optimizer keeps: a momentum slot exists whenever the option is
// non-zero, even if it rounds to 0.0f.
inline UpdateRule sgd_rule(double learning_rate, double momentum, bool nesterov) {
  UpdateRule rule;
  rule.kind = momentum == 0.0 ? UpdateKind::sgd
              : nesterov      ? UpdateKind::sgd_nesterov
                              : UpdateKind::sgd_momentum;
  rule.constants.learning_rate = static_cast<float>(learning_rate);
  rule.constants.momentum = static_cast<float>(momentum);
  return rule;
}

// `iteration` is the count before the step (t = iteration + 1). The bias corrections are folded
// into one step size, in double: beta^t for large t underflows gracefully to 0 and the correction
// tends to 1. weight_decay is 0 for Adam.
inline UpdateRule adam_rule(double learning_rate, std::int64_t iteration, double beta_1,
                            double beta_2, double epsilon, double weight_decay) {
  const double t = static_cast<double>(iteration + 1);
  const double alpha =
      learning_rate * std::sqrt(1.0 - std::pow(beta_2, t)) / (1.0 - std::pow(beta_1, t));
  UpdateRule rule;
  rule.kind = UpdateKind::adam;
  rule.constants.alpha = static_cast<float>(alpha);
  rule.constants.one_minus_beta_1 = static_cast<float>(1.0 - beta_1);
  rule.constants.one_minus_beta_2 = static_cast<float>(1.0 - beta_2);
  rule.constants.epsilon = static_cast<float>(epsilon);
  rule.constants.decay = static_cast<float>(weight_decay * learning_rate);
  return rule;
}

enum class RmspropMomentum { none, with_momentum };
enum class RmspropCentered { no, yes };
inline UpdateRule rmsprop_rule(double learning_rate, double rho, double momentum, double epsilon,
                               RmspropMomentum slot, RmspropCentered centered) {
  const bool with_momentum = slot == RmspropMomentum::with_momentum;
  UpdateRule rule;
  if (centered == RmspropCentered::yes) {
    rule.kind =
        with_momentum ? UpdateKind::rmsprop_centered_momentum : UpdateKind::rmsprop_centered;
  } else {
    rule.kind = with_momentum ? UpdateKind::rmsprop_momentum : UpdateKind::rmsprop;
  }
  rule.constants.learning_rate = static_cast<float>(learning_rate);
  rule.constants.rho = static_cast<float>(rho);
  rule.constants.one_minus_rho = 1.0f - rule.constants.rho;  // in float
  rule.constants.momentum = static_cast<float>(momentum);
  rule.constants.epsilon = static_cast<float>(epsilon);
  return rule;
}

}  // namespace mixprec::optimizers::detail
