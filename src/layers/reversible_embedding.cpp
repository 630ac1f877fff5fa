// ReversibleEmbedding: an Embedding (embedding_impl.h) whose floating calls compute the tied
// logits; reverse() is that call with a dtype check.
#include "mixprec/layers/reversible_embedding.h"

#include <string>

#include "layers/embedding_impl.h"
#include "mixprec/error.h"

namespace mixprec::layers {

namespace {

void check_reverse_input(const Layer& layer, DType dtype) {
  if (!is_floating(dtype)) {
    throw DTypeError(layer.name() +
                     ": ReversibleEmbedding::reverse expects floating features "
                     "(..., output_dim), got " +
                     std::string(dtype_name(dtype)) + "; call the layer itself on integer ids");
  }
}

}  // namespace

ReversibleEmbedding::ReversibleEmbedding(std::int64_t input_dim, std::int64_t output_dim,
                                         EmbeddingOptions options)
    : Embedding(std::make_shared<detail::EmbeddingImpl>(input_dim, output_dim, options,
                                                        detail::Reversible::yes)) {}

ReversibleEmbedding::ReversibleEmbedding(const Layer& layer) : Embedding(layer) {
  if (detail::embedding_impl(*this).reversible_ != detail::Reversible::yes) {
    throw ValueError("ReversibleEmbedding: layer '" + layer.name() + "' is a " +
                     layer.class_name() + ", not a ReversibleEmbedding");
  }
}

Tensor ReversibleEmbedding::reverse(const Tensor& x, CallOptions options) const {
  if (x.defined()) check_reverse_input(*this, x.dtype());
  return (*this)(x, options);
}

KerasTensor ReversibleEmbedding::reverse(const KerasTensor& x) const {
  check_reverse_input(*this, x.dtype());
  return (*this)(x);
}

}  // namespace mixprec::layers
