// Cropping1D (keras.layers.Cropping1D): removes `left` rows from the start and `right` rows from
// the end of axis 1 of (batch, steps, features), giving (batch, steps - left - right, features)
// in the input's dtype. left + right must leave at least one row (ShapeError otherwise, checked on
// each call when steps is unknown symbolically). The gradient is zero on the cropped rows.
#pragma once

#include <cstdint>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct Cropping1DAmounts {
  std::int64_t left = 1;  // Keras's default cropping=(1, 1)
  std::int64_t right = 1;
};

class Cropping1D : public Layer {
 public:
  // left, right >= 0 (ValueError otherwise).
  explicit Cropping1D(Cropping1DAmounts cropping = {}, LayerOptions options = {});
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
