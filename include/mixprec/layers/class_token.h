// ClassToken: prepends one learned token to a sequence, as a Vision Transformer's "[class]" token
// (Dosovitskiy et al.; the ClassToken layer of the Keras ViT examples). (batch, N, C) ->
// (batch, N + 1, C): row 0 is the variable "token" (C), in the variable dtype (float32 under mixed
// policies) and cast to the compute dtype, the same for every sample; rows 1..N are the input.
// The token's gradient is the sum over the batch of row 0's. Read the token back out after the
// encoder with Cropping1D({0, N}) and Flatten.
#pragma once

#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct ClassTokenOptions {
  initializers::Initializer initializer = "zeros";  // the ViT paper's
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class ClassToken : public Layer {
 public:
  explicit ClassToken(ClassTokenOptions options = {});
  // A handle to an existing ClassToken (ValueError when `layer` is not one).
  explicit ClassToken(const Layer& layer);

  // The token (C), once built (ValueError before).
  Tensor token() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
