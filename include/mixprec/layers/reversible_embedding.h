// ReversibleEmbedding (keras_hub.layers.ReversibleEmbedding with tie_weights = true): an Embedding
// whose table also serves as the tied output head of a language model. One layer, two call forms,
// chosen by the input's dtype:
//   - integer ids (..., ) -> embeddings (..., output_dim) in the compute dtype (as Embedding);
//   - floating x (..., output_dim) -> logits = x @ embeddings^T (..., input_dim) in the compute
//     dtype (x is autocast; the float32 table is read in the compute dtype; 16-bit products
//     accumulate in float32 unless mixed_precision::fp16_matmul_use_fp32_compute() is off).
// `emb(ids)` and `emb.reverse(x)` (the second form, which also checks that x is floating) both
// work on Tensors and on KerasTensors. In a functional model the layer is then a shared layer with
// two calls: the table's gradient is the sum of both uses, and the model config records both calls
// (save/load round-trips it).
#pragma once

#include <cstdint>

#include "mixprec/layers/embedding.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class ReversibleEmbedding : public Embedding {
 public:
  ReversibleEmbedding(std::int64_t input_dim, std::int64_t output_dim,
                      EmbeddingOptions options = {});
  // A handle to an existing ReversibleEmbedding (ValueError when `layer` is not one).
  explicit ReversibleEmbedding(const Layer& layer);

  // The logits form: x (..., output_dim) floating -> (..., input_dim). DTypeError for integer x.
  Tensor reverse(const Tensor& x, CallOptions options = {}) const;
  KerasTensor reverse(const KerasTensor& x) const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
