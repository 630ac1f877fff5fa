// Flatten: (batch, d1, d2, ...) -> (batch, d1 * d2 * ...); a rank-1 input becomes (batch, 1).
#pragma once

#include "mixprec/layers/layer.h"

namespace mixprec::layers {

class Flatten : public Layer {
 public:
  explicit Flatten(LayerOptions options = {});
};

}  // namespace mixprec::layers
