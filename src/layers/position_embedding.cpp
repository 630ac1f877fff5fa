// PositionEmbedding: x (batch, ..., T, C) -> the table's first T rows (T, C) in the compute dtype,
// broadcast to x's shape (keras_hub semantics).
#include "mixprec/layers/position_embedding.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::layers {

namespace {

class PositionEmbeddingImpl final : public LayerImpl {
 public:
  PositionEmbeddingImpl(std::int64_t sequence_length, const PositionEmbeddingOptions& o)
      : LayerImpl("PositionEmbedding", {o.dtype, o.name, o.trainable}),
        sequence_length_(sequence_length),
        o_(o) {
    if (sequence_length < 1) {
      throw ValueError(name() + ": PositionEmbedding needs sequence_length >= 1, got " +
                       std::to_string(sequence_length));
    }
  }

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["sequence_length"] = sequence_length_;
    c["initializer"] = detail::initializer_config(o_.initializer, name(), "initializer");
    return c;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (s.size() < 3) {
      throw ShapeError(name() +
                       ": PositionEmbedding expects an input (batch, sequence, "
                       "features), got shape " +
                       partial_shape_to_string(s));
    }
    // The sequence axis may be unknown in a symbolic call (a language model takes any length up
    // to sequence_length); each real call checks its length.
    const std::int64_t t = s[s.size() - 2], c = s.back();
    if (c < 0) {
      throw ShapeError(name() + ": PositionEmbedding needs a known feature axis, got shape " +
                       partial_shape_to_string(s));
    }
    if (t > sequence_length_) {
      throw ShapeError(
          name() + ": the input " + partial_shape_to_string(s) + " has " + std::to_string(t) +
          " positions, more than sequence_length = " + std::to_string(sequence_length_) +
          "; build the layer with a larger sequence_length or truncate the input");
    }
    if (embeddings_.defined() && c != embeddings_.dim(1)) {
      throw ShapeError(name() + ": expected an input with " + std::to_string(embeddings_.dim(1)) +
                       " features (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same feature size "
                       "or use a new layer");
    }
  }

  void build(const std::vector<PartialShape>& shapes) override {
    embeddings_ =
        add_weight("embeddings", Shape{sequence_length_, shapes[0].back()}, o_.initializer);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {shapes[0]};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    return {TensorSpec{inputs[0].shape, compute_dtype()}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, ..., T, C): only its shape is used
    const std::int64_t t = x.dim(-2);
    // (T, C) rows of the table in the compute dtype, broadcast; the gradient sums back to them.
    const Tensor rows = slice(read(embeddings_), 0, 0, t);
    return {broadcast_to(rows, x.shape())};
  }

  std::int64_t sequence_length_;
  PositionEmbeddingOptions o_;
  Tensor embeddings_;
};

const PositionEmbeddingImpl& pe_impl(const Layer& layer) {
  return static_cast<const PositionEmbeddingImpl&>(layer.impl());
}

}  // namespace

PositionEmbedding::PositionEmbedding(std::int64_t sequence_length, PositionEmbeddingOptions options)
    : Layer(std::make_shared<PositionEmbeddingImpl>(sequence_length, options)) {}

PositionEmbedding::PositionEmbedding(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<PositionEmbeddingImpl*>(&impl()) == nullptr) {
    throw ValueError("PositionEmbedding: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a PositionEmbedding");
  }
}

std::int64_t PositionEmbedding::sequence_length() const { return pe_impl(*this).sequence_length_; }

Tensor PositionEmbedding::embeddings() const {
  const PositionEmbeddingImpl& p = pe_impl(*this);
  if (!p.built()) {
    throw ValueError(p.name() +
                     ": embeddings does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return p.embeddings_;
}

}  // namespace mixprec::layers
