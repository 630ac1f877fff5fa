// Embedding: integer ids (any shape) -> ids.shape + (output_dim,) rows of a learned table (Keras
// keras.layers.Embedding). The table "embeddings" (input_dim, output_dim) is a variable in the
// variable dtype (float32 under mixed policies); the ids are never cast (an integer input is not
// autocast), and the output is in the compute dtype: each gathered float32 value is rounded once
// (mixprec::embedding_lookup; the gradient reaches the float32 table as a deterministic
// scatter-add). Floating ids are a DTypeError (convert token ids to int32/int64); an id outside
// [0, input_dim) is a ValueError naming the id and its position (for ids on the CPU; on CUDA
// device-resident ids give NaN rows: see mixprec/transformer_ops.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct EmbeddingOptions {
  // Keras' "uniform": RandomUniform(-0.05, 0.05), spelled random_uniform here.
  initializers::Initializer embeddings_initializer = "random_uniform";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Embedding : public Layer {
 public:
  // input_dim: the vocabulary size V >= 1; output_dim: the embedding width C >= 1 (ValueError
  // otherwise).
  Embedding(std::int64_t input_dim, std::int64_t output_dim, EmbeddingOptions options = {});
  // A handle to an existing Embedding (ValueError when `layer` is not one; a ReversibleEmbedding
  // is one).
  explicit Embedding(const Layer& layer);

  std::int64_t input_dim() const;
  std::int64_t output_dim() const;
  // The table (input_dim, output_dim), once built (ValueError before).
  Tensor embeddings() const;

 protected:
  explicit Embedding(std::shared_ptr<LayerImpl> impl) : Layer(std::move(impl)) {}
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
