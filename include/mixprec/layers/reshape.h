// Reshape: (batch, ...) -> (batch, target_shape...). The target excludes the batch axis; one
// extent may be -1 (inferred from the others). The element count must match.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class Reshape : public Layer {
 public:
  explicit Reshape(std::vector<std::int64_t> target_shape, LayerOptions options = {});
  const std::vector<std::int64_t>& target_shape() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
