// Model zoo (keras.applications): ready-made models built from the public layers.
//
//   auto model = mp::applications::mlp({.units = 4096});   // seed 001's 784-4096-4096-10 model
//
// mlp() is the model of seed 001 (the TensorFlow mixed-precision guide):
//   Input((input_features,), name "digits")
//   -> Dense(units, activation) x hidden_layers          "dense_1", "dense_2", ...
//   -> Dense(classes)                                    "dense_logits" (logits, compute dtype)
//   -> Activation("softmax", dtype float32)              "predictions"  (float32 probabilities)
// The softmax runs in float32 whatever the policy, so the model output is float32 (the seed's
// "CORRECT" model), and the loss is "sparse_categorical_crossentropy" on probabilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"

namespace mixprec::applications {

struct MlpOptions {
  std::int64_t units = 512;           // width of each hidden layer, > 0
  int hidden_layers = 2;              // >= 0; 0 gives a linear softmax classifier
  std::int64_t input_features = 784;  // > 0 (28 * 28 for Fashion-MNIST)
  std::int64_t classes = 10;          // >= 2
  std::string activation = "relu";    // hidden-layer activation, by name (activations.h)
  // Policy of the hidden and logits layers; default: the global policy at construction. The
  // output softmax is float32 regardless.
  std::optional<mixed_precision::Policy> dtype;
  std::string name = "mlp";
};

// Builds (and so initialises, from mixprec::default_generator(): set_seed() first for repeatable
// weights) the seed 001 multilayer perceptron. Throws ValueError for a non-positive size, fewer
// than two classes, or an unknown activation (naming the valid ones).
Model mlp(const MlpOptions& options = {});

// The number of multiply-adds of one sample's forward pass through mlp(options)'s Dense kernels
// (input_features * units + (hidden_layers - 1) * units^2 + units * classes); a training step
// costs about 6 * batch * this in floating-point operations (forward 2, backward 4).
std::int64_t mlp_kernel_elements(const MlpOptions& options);

}  // namespace mixprec::applications
