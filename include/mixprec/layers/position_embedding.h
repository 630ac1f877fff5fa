// PositionEmbedding (keras_hub.layers.PositionEmbedding): learned position embeddings. The input
// (batch, ..., T, C) only supplies the shape: the output is the table's rows 0..T-1, (T, C),
// broadcast to the input's shape, in the compute dtype (add it to the token embeddings yourself).
// The variable "embeddings" (sequence_length, C) is created on the first call from the input's
// last axis, in the variable dtype (float32 under mixed policies). T > sequence_length is a
// ShapeError, checked on each call (a symbolic input's sequence axis may be unknown: a language
// model takes any length up to sequence_length).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct PositionEmbeddingOptions {
  initializers::Initializer initializer = "glorot_uniform";  // keras_hub's default
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class PositionEmbedding : public Layer {
 public:
  // sequence_length >= 1: the longest sequence the layer embeds (ValueError otherwise).
  explicit PositionEmbedding(std::int64_t sequence_length, PositionEmbeddingOptions options = {});
  // A handle to an existing PositionEmbedding (ValueError when `layer` is not one).
  explicit PositionEmbedding(const Layer& layer);

  std::int64_t sequence_length() const;
  // The table (sequence_length, C), once built (ValueError before).
  Tensor embeddings() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
