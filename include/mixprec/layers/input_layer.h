// Inputs of a functional model: mp::Input({784}, {.name = "digits"}) is the KerasTensor that an
// InputLayer produces. An InputLayer is also how a Sequential model learns its input shape:
//   mp::Sequential({mp::layers::InputLayer({784}), mp::layers::Dense(10)})
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct InputOptions {
  DType dtype = DType::float32;  // the dtype the model expects (the first layer autocasts it)
  std::string name;              // default: "input_layer", "input_layer_1", ...
  std::int64_t batch_size = -1;  // -1: any batch size
};

namespace layers {

class InputLayer : public Layer {
 public:
  // `shape` excludes the batch axis; an extent may be -1 (unknown, e.g. a variable length).
  explicit InputLayer(std::vector<std::int64_t> shape, InputOptions options = {});
  // The symbolic tensor this layer produces: shape (batch_size, shape...), the layer's dtype.
  // Returns the same KerasTensor while one is alive.
  KerasTensor output() const;
  DType dtype() const;
  // The full shape including the batch axis (-1 when any batch size is accepted).
  const PartialShape& batch_shape() const;
};

}  // namespace layers

// The Keras spelling: a symbolic input of shape (None, shape...).
KerasTensor Input(std::vector<std::int64_t> shape, InputOptions options = {});

}  // namespace mixprec

#pragma GCC visibility pop
