// Activation layers: Activation("softmax") applies an activation by name (activations.h);
// Softmax(axis) normalises over any axis. Neither has variables. The seed's "CORRECT" model ends
// in Activation("softmax", {.dtype = "float32"}) so that the model output is float32.
#pragma once

#include <optional>
#include <string>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct ActivationOptions {
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Activation : public Layer {
 public:
  // Throws ValueError listing the valid names for an unknown activation.
  explicit Activation(std::string activation, ActivationOptions options = {});
  const std::string& activation() const;
};

class Softmax : public Layer {
 public:
  explicit Softmax(int axis = -1, LayerOptions options = {});
  explicit Softmax(LayerOptions options) : Softmax(-1, std::move(options)) {}
  int axis() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
