// RMSprop, as keras.optimizers.RMSprop in Keras 3 (and the Keras 2.11+ optimizer): epsilon sits
// inside the square root.
//   v = rho * v + (1 - rho) * g^2
//   centered:  a = rho * a + (1 - rho) * g;  denominator = v - a^2 + epsilon
//   otherwise: denominator = v + epsilon
//   increment = lr * g / sqrt(denominator)
//   momentum > 0: mom = momentum * mom + increment; var -= mom
//   otherwise:    var -= increment
// Slots "velocity" (v), then "momentum" when momentum > 0, then "average_gradient" (a) when
// centered.
#pragma once

#include <optional>

#include "mixprec/optimizers/optimizer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::optimizers {

struct RMSpropOptions {
  LearningRate learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
};

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(RMSpropOptions options = {});
};

}  // namespace mixprec::optimizers

#pragma GCC visibility pop
