// models::check_sparse_labels (src/models/label_check.h).
#include "models/label_check.h"

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/error.h"
#include "models/model_impl.h"

namespace mixprec::models {

void check_sparse_labels(const Model& model, const TrainingState& state, const Tensor& y,
                         const char* what, const char* y_name) {
  if (!y.defined() || y.rank() < 1 || y.dim(0) == 0) return;
  const DType d = y.dtype();
  if (d != DType::int32 && d != DType::int64 && d != DType::uint8) return;
  if (!state.loss.defined() || state.loss.name() != "sparse_categorical_crossentropy") return;
  const ModelImpl& impl = model.model_impl();
  if (!impl.has_graph() || impl.outputs().size() != 1) return;
  const PartialShape& out = impl.outputs()[0].shape();
  if (out.empty() || out.back() <= 0) return;
  const std::int64_t classes = out.back();
  // (N,) or (N, 1): one label a sample; anything else is the loss's to refuse.
  const std::int64_t per_sample = y.numel() / y.dim(0);
  if (per_sample != 1) return;
  const std::vector<std::int64_t> labels = y.to_vector<std::int64_t>();  // (N,)
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 0 && labels[i] < classes) continue;
    throw ValueError(
        "model '" + model.name() + "': " + what + ": " + y_name + "[" + std::to_string(i) +
        "] is " + std::to_string(labels[i]) + ", out of range for the model's " +
        std::to_string(classes) + " classes (output '" + impl.outputs()[0].name() +
        "'; sparse_categorical_crossentropy takes labels 0 to " + std::to_string(classes - 1) +
        "); fix the label, or give the last layer one unit per class");
  }
}

}  // namespace mixprec::models
