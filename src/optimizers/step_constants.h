// The per-step constants of the fused updates (cpu::SGDStep, AdamStep, RMSpropStep): computed once
// per step on the host, in double, and rounded to float once. The CPU loops and the CUDA kernels
// (backend/cuda/optimizers.h) receive the same values, so both backends run the same float
// arithmetic.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cpu/optimizer_kernels.h"

namespace mixprec::optimizers::detail {

inline cpu::SGDStep sgd_step(double learning_rate, double momentum, bool nesterov) {
  return {.learning_rate = static_cast<float>(learning_rate),
          .momentum = static_cast<float>(momentum),
          .nesterov = nesterov};
}

// `iteration` is the count before the step (t = iteration + 1). The bias corrections are folded
// into one step size, in double: beta^t for large t underflows gracefully to 0 and the correction
// tends to 1. weight_decay is 0 for Adam.
inline cpu::AdamStep adam_step(double learning_rate, std::int64_t iteration, double beta_1,
                               double beta_2, double epsilon, double weight_decay) {
  const double t = static_cast<double>(iteration + 1);
  const double alpha =
      learning_rate * std::sqrt(1.0 - std::pow(beta_2, t)) / (1.0 - std::pow(beta_1, t));
  return {.alpha = static_cast<float>(alpha),
          .one_minus_beta_1 = static_cast<float>(1.0 - beta_1),
          .one_minus_beta_2 = static_cast<float>(1.0 - beta_2),
          .epsilon = static_cast<float>(epsilon),
          .decay = static_cast<float>(weight_decay * learning_rate)};
}

inline cpu::RMSpropStep rmsprop_step(double learning_rate, double rho, double momentum,
                                     double epsilon) {
  return {.learning_rate = static_cast<float>(learning_rate),
          .rho = static_cast<float>(rho),
          .momentum = static_cast<float>(momentum),
          .epsilon = static_cast<float>(epsilon)};
}

}  // namespace mixprec::optimizers::detail
