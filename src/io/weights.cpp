// Model::save_weights / load_weights in safetensors (include/mixprec/models/model.h). A training
// checkpoint (include/mixprec/io/checkpoint.h) loads too: its "model/" tensors are the weights.
#include "io/weights.h"

#include <map>
#include <string>
#include <vector>

#include "io/model_files.h"
#include "io/nonfinite.h"
#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/models/model.h"
#include "mixprec/version.h"

namespace mixprec {

namespace io::detail {

std::string file_format(const SafetensorsContents& file) {
  const auto it = file.metadata.find("format");
  return it == file.metadata.end() ? std::string() : it->second;
}

void apply_weights(Model& model, const SafetensorsContents& file, const std::string& where,
                   const LoadOptions& options) {
  const bool checkpoint = file_format(file) == kCheckpointFormat;
  const std::string kind = checkpoint ? "the training checkpoint" : "the file";
  constexpr std::string_view kModelPart = "model/";
  std::map<std::string, const Tensor*> saved;
  for (const auto& [n, t] : file.tensors) {
    if (!checkpoint) {
      saved[n] = &t;
    } else if (n.rfind(kModelPart, 0) == 0) {  // optimizer slots are not weights
      saved[n.substr(kModelPart.size())] = &t;
    }
  }
  // Every check first: the model is written only when the file fits it exactly.
  std::vector<Tensor> weights;
  for (const layers::NamedVariable& v : model.named_variables()) {
    const auto it = saved.find(v.name);
    if (it == saved.end()) {
      throw ValueError(where + ": no variable '" + v.name + "' for model '" + model.name() +
                       "' in " + kind + " (are these the weights of another model?)");
    }
    const Tensor& t = *it->second;
    if (t.dtype() != v.value.dtype() || t.shape() != v.value.shape()) {
      throw ValueError(
          where + ": " + v.name + ": " + kind + " has " + std::string(dtype_name(t.dtype())) + " " +
          t.shape().to_string() + ", model '" + model.name() + "' expects " +
          std::string(dtype_name(v.value.dtype())) + " " + v.value.shape().to_string());
    }
    weights.push_back(t);
    saved.erase(it);
  }
  if (!saved.empty()) {
    throw ValueError(where + ": " + kind + " has variable '" + saved.begin()->first +
                     "', which model '" + model.name() + "' does not have (" +
                     std::to_string(saved.size()) +
                     " extra; are these the weights of another model?)");
  }
  check_finite(file.tensors, "", options, where);
  model.set_weights(weights);
}

void load_weights_from(Model& model, const SafetensorsContents& file, const std::string& where) {
  apply_weights(model, file, where, LoadOptions{});
}

}  // namespace io::detail

void Model::save_weights(const std::filesystem::path& path) const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const layers::NamedVariable& v : named_variables()) tensors.emplace_back(v.name, v.value);
  io::save_safetensors(
      path, tensors,
      {{"format", io::detail::kWeightsFormat}, {"model", name()}, {"mixprec_version", version()}});
}

void Model::load_weights(const std::filesystem::path& path, const LoadOptions& options) {
  io::detail::apply_weights(*this, io::load_safetensors(path), path.string(), options);
}

}  // namespace mixprec
