// Stochastic gradient descent with optional (Nesterov) momentum, as keras.optimizers.SGD:
//   momentum == 0:  var -= lr * g
//   otherwise:      m = momentum * m - lr * g
//                   var += m                        (plain)
//                   var += momentum * m - lr * g    (nesterov, with the updated m)
// One slot, "momentum", only when momentum != 0.
#pragma once

#include <optional>

#include "mixprec/optimizers/optimizer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::optimizers {

struct SGDOptions {
  LearningRate learning_rate = 0.01;
  double momentum = 0.0;  // in [0, 1]
  bool nesterov = false;
  std::optional<double> clipnorm;         // clip each gradient to this L2 norm
  std::optional<double> clipvalue;        // clip each gradient element to [-clipvalue, clipvalue]
  std::optional<double> global_clipnorm;  // clip all gradients together to this L2 norm
};

class SGD : public Optimizer {
 public:
  explicit SGD(SGDOptions options = {});
};

}  // namespace mixprec::optimizers

#pragma GCC visibility pop
