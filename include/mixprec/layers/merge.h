// Merge layers: combine two or more inputs into one. Call them on a list:
//   auto s = mp::layers::Add()({a, b});
// Add and Multiply need shapes that broadcast (NumPy rules; usually equal); Concatenate joins along
// `axis` and needs every other extent equal. A mismatch throws ShapeError naming the layer and the
// shapes. Every floating input is cast to the compute dtype first, so float16 and float32 inputs
// mix.
#pragma once

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class Add : public Layer {
 public:
  explicit Add(LayerOptions options = {});
};

class Multiply : public Layer {
 public:
  explicit Multiply(LayerOptions options = {});
};

class Concatenate : public Layer {
 public:
  explicit Concatenate(int axis = -1, LayerOptions options = {});
  explicit Concatenate(LayerOptions options) : Concatenate(-1, std::move(options)) {}
  int axis() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
