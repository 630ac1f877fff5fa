// Flatten: (batch, d1, d2, ...) -> (batch, d1 * d2 * ...); a rank-1 input becomes (batch, 1).
#pragma once

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class Flatten : public Layer {
 public:
  explicit Flatten(LayerOptions options = {});
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
