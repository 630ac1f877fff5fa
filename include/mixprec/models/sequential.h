// Sequential: a plain stack of single-input, single-output layers.
//   mp::Sequential model({mp::layers::InputLayer({784}), mp::layers::Dense(64, {.activation =
//   "relu"}),
//                         mp::layers::Dense(10)});
// With an InputLayer first the model is built at once (variables exist, summary() works, each add()
// is checked against the running output shape). Without one it is built on its first call, from
// that input's shape (the batch axis is left unknown) — like Keras.
#pragma once

#include <string>
#include <vector>

#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct SequentialOptions {
  std::string name;  // default: "sequential", "sequential_1", ...
  bool trainable = true;
};

class Sequential : public Model {
 public:
  explicit Sequential(SequentialOptions options = {});
  explicit Sequential(const std::vector<layers::Layer>& layers, SequentialOptions options = {});

  // Appends a layer. An InputLayer is accepted only first. When the input shape is known the layer
  // is built now and a shape mismatch throws here (the layer is then not added).
  void add(const layers::Layer& layer);
  // Removes the last layer (ValueError when there is none).
  void pop();
};

}  // namespace mixprec

#pragma GCC visibility pop
