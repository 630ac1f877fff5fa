// Dropout: identity unless called with {.training = true}; then each element is zeroed with
// probability `rate` and the kept ones are scaled by 1 / (1 - rate) (inverted dropout, so the
// expected value is unchanged and inference needs no rescaling).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct DropoutOptions {
  // With a seed the layer owns a generator seeded with it: two layers with the same seed draw the
  // same sequence of masks. Without one, masks come from mixprec::default_generator().
  std::optional<std::uint64_t> seed;
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Dropout : public Layer {
 public:
  // rate in [0, 1); anything else throws ValueError.
  explicit Dropout(double rate, DropoutOptions options = {});
  double rate() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
