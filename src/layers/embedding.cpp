// Embedding and ReversibleEmbedding's shared implementation (embedding_impl.h): the lookup
// (mixprec::embedding_lookup) for integer ids and, for the reversible layer, the tied logits
// x @ embeddings^T for floating inputs.
#include "mixprec/layers/embedding.h"

#include <string>

#include "layers/embedding_impl.h"
#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/transformer_ops.h"

namespace mixprec::layers {

namespace detail {

namespace {

bool is_integer_ids(DType dtype) { return dtype == DType::int32 || dtype == DType::int64; }

}  // namespace

EmbeddingImpl::EmbeddingImpl(std::int64_t input_dim, std::int64_t output_dim,
                             const EmbeddingOptions& o, Reversible reversible)
    : LayerImpl(reversible == Reversible::yes ? "ReversibleEmbedding" : "Embedding",
                {o.dtype, o.name, o.trainable}),
      input_dim_(input_dim),
      output_dim_(output_dim),
      options_(o),
      reversible_(reversible) {
  if (input_dim < 1 || output_dim < 1) {
    throw ValueError(name() + ": " + class_name() +
                     " needs input_dim (the vocabulary size) >= 1 and output_dim >= 1, got " +
                     std::to_string(input_dim) + " and " + std::to_string(output_dim));
  }
}

nlohmann::json EmbeddingImpl::get_config() const {
  nlohmann::json c = base_config();
  c["input_dim"] = input_dim_;
  c["output_dim"] = output_dim_;
  c["embeddings_initializer"] =
      detail::initializer_config(options_.embeddings_initializer, name(), "embeddings_initializer");
  return c;
}

void EmbeddingImpl::check_input(DType dtype, const PartialShape& shape) const {
  if (is_integer_ids(dtype)) return;
  if (is_floating(dtype) && reversible_ == Reversible::yes) {
    if (shape.empty() || shape.back() != output_dim_) {
      throw ShapeError(name() + ": the logits form of ReversibleEmbedding expects x (..., " +
                       std::to_string(output_dim_) + ") (output_dim features), got shape " +
                       partial_shape_to_string(shape));
    }
    return;
  }
  const std::string fix = reversible_ == Reversible::yes
                              ? "; pass int32/int64 token ids, or floating (..., output_dim) "
                                "features for the logits form"
                              : "; convert token ids with .to(mp::DType::int32) (floating ids are "
                                "not rounded implicitly)";
  throw DTypeError(name() + ": " + class_name() + " expects int32 or int64 ids, got " +
                   std::string(dtype_name(dtype)) + " " + partial_shape_to_string(shape) + fix);
}

void EmbeddingImpl::validate(const std::vector<PartialShape>&) const {}

void EmbeddingImpl::build(const std::vector<PartialShape>&) {
  embeddings_ =
      add_weight("embeddings", Shape{input_dim_, output_dim_}, options_.embeddings_initializer);
}

std::vector<PartialShape> EmbeddingImpl::compute_output_shape(
    const std::vector<PartialShape>& shapes) const {
  PartialShape out = shapes[0];
  out.push_back(output_dim_);
  return {out};
}

std::vector<TensorSpec> EmbeddingImpl::compute_output_spec(
    const std::vector<TensorSpec>& inputs) const {
  const TensorSpec& in = inputs[0];
  check_input(in.dtype, in.shape);
  PartialShape out = in.shape;
  if (is_integer_ids(in.dtype)) {
    out.push_back(output_dim_);
  } else {
    out.back() = input_dim_;
  }
  return {TensorSpec{out, compute_dtype()}};
}

std::vector<Tensor> EmbeddingImpl::call(const std::vector<Tensor>& inputs, const CallOptions&) {
  const Tensor& x = inputs[0];  // ids (never cast), or (..., C) in the compute dtype
  check_input(x.dtype(), to_partial_shape(x.shape()));
  if (is_integer_ids(x.dtype())) {
    try {
      return {embedding_lookup(embeddings_, x, compute_dtype())};
    } catch (const ValueError& e) {
      throw ValueError(name() + ": " + e.what());
    }
  }
  // Logits: (rows, C) x (V, C)^T in the compute dtype; the table read through a differentiable
  // cast (its gradient, summed with the lookup's, arrives in float32).
  const Accumulation accumulation = accumulation_dtype() == x.dtype() && is_16bit_float(x.dtype())
                                        ? Accumulation::compute_dtype
                                        : Accumulation::float32;
  const Tensor x2 = reshape(x, Shape{x.numel() / output_dim_, output_dim_});
  const Tensor logits = matmul(x2, read(embeddings_), Transpose::no, Transpose::yes, accumulation);
  std::vector<std::int64_t> dims(x.shape().begin(), x.shape().end());
  dims.back() = input_dim_;
  return {reshape(logits, Shape(dims))};
}

const EmbeddingImpl& embedding_impl(const Layer& layer) {
  return static_cast<const EmbeddingImpl&>(layer.impl());
}

}  // namespace detail

Embedding::Embedding(std::int64_t input_dim, std::int64_t output_dim, EmbeddingOptions options)
    : Layer(std::make_shared<detail::EmbeddingImpl>(input_dim, output_dim, options,
                                                    detail::Reversible::no)) {}

Embedding::Embedding(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<detail::EmbeddingImpl*>(&impl()) == nullptr) {
    throw ValueError("Embedding: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not an Embedding");
  }
}

std::int64_t Embedding::input_dim() const { return detail::embedding_impl(*this).input_dim_; }
std::int64_t Embedding::output_dim() const { return detail::embedding_impl(*this).output_dim_; }

Tensor Embedding::embeddings() const {
  const detail::EmbeddingImpl& e = detail::embedding_impl(*this);
  if (!e.built()) {
    throw ValueError(e.name() +
                     ": embeddings does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return e.embeddings_;
}

}  // namespace mixprec::layers
