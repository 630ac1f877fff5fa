// Adam and AdamW, as keras.optimizers.Adam / AdamW (the "epsilon hat" form of Kingma & Ba, §2):
//   t = iterations + 1
//   m += (1 - beta_1) * (g - m)
//   v += (1 - beta_2) * (g^2 - v)
//   var -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)
// AdamW first applies decoupled weight decay with the same learning rate:
//   var -= var * weight_decay * lr
// except to the variables excluded by exclude_from_weight_decay (optimizer.h).
// Slots "momentum" (m) and "velocity" (v).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mixprec/optimizers/optimizer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::optimizers {

struct AdamOptions {
  LearningRate learning_rate = 0.001;
  double beta_1 = 0.9;    // in [0, 1)
  double beta_2 = 0.999;  // in [0, 1)
  double epsilon = 1e-7;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
};

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {});
};

struct AdamWOptions {
  LearningRate learning_rate = 0.001;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
  // var_names of exclude_from_weight_decay (Optimizer::exclude_from_weight_decay), given at
  // construction: e.g. {"gamma", "beta", "bias", "embeddings"}.
  std::vector<std::string> exclude_from_weight_decay;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWOptions options = {});
};

}  // namespace mixprec::optimizers

#pragma GCC visibility pop
