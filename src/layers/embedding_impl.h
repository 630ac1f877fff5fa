// The state and behaviour of Embedding and ReversibleEmbedding (one class: the reversible one adds
// the logits form for floating inputs). Internal to src/layers/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/layers/embedding.h"

namespace mixprec::layers::detail {

enum class Reversible { no, yes };

class EmbeddingImpl final : public LayerImpl {
 public:
  EmbeddingImpl(std::int64_t input_dim, std::int64_t output_dim, const EmbeddingOptions& o,
                Reversible reversible);

  nlohmann::json get_config() const override;
  bool uses_matmul() const override { return reversible_ == Reversible::yes; }
  void validate(const std::vector<PartialShape>& shapes) const override;
  void build(const std::vector<PartialShape>& shapes) override;
  // The lookup form's shape (ids.shape + (output_dim)); compute_output_spec picks the form.
  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override;
  std::vector<TensorSpec> compute_output_spec(const std::vector<TensorSpec>& inputs) const override;
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override;

  // Throws DTypeError for a floating input to a plain Embedding, or for an input that is neither
  // integer nor floating; ShapeError for a logits input whose last axis is not output_dim.
  void check_input(DType dtype, const PartialShape& shape) const;

  std::int64_t input_dim_, output_dim_;
  EmbeddingOptions options_;
  Reversible reversible_;
  Tensor embeddings_;
};

const EmbeddingImpl& embedding_impl(const Layer& layer);

}  // namespace mixprec::layers::detail
