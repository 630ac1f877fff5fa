// Model::save_weights / load_weights in safetensors (include/mixprec/models/model.h).
#include "io/weights.h"

#include <map>
#include <string>
#include <vector>

#include "io/nonfinite.h"
#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/models/model.h"
#include "mixprec/version.h"

namespace mixprec {

void Model::save_weights(const std::filesystem::path& path) const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const layers::NamedVariable& v : named_variables()) tensors.emplace_back(v.name, v.value);
  io::save_safetensors(
      path, tensors,
      {{"format", "mixprec-weights"}, {"model", name()}, {"mixprec_version", version()}});
}

void Model::load_weights(const std::filesystem::path& path, const LoadOptions& options) {
  io::detail::apply_weights(*this, io::load_safetensors(path), path.string(), options);
}

namespace io::detail {

void apply_weights(Model& model, const SafetensorsContents& file, const std::string& where,
                   const LoadOptions& options) {
  const std::string& name = model.name();
  std::map<std::string, const Tensor*> saved;
  for (const auto& [n, t] : file.tensors) saved[n] = &t;
  // Every check first: the model is written only when the file fits it exactly.
  std::vector<Tensor> weights;
  for (const layers::NamedVariable& v : model.named_variables()) {
    const auto it = saved.find(v.name);
    if (it == saved.end()) {
      throw ValueError(where + ": no variable '" + v.name + "' for model '" + name +
                       "' in the file (are these the weights of another model?)");
    }
    const Tensor& t = *it->second;
    if (t.dtype() != v.value.dtype() || t.shape() != v.value.shape()) {
      throw ValueError(
          where + ": " + v.name + ": the file has " + std::string(dtype_name(t.dtype())) + " " +
          t.shape().to_string() + ", model '" + name + "' expects " +
          std::string(dtype_name(v.value.dtype())) + " " + v.value.shape().to_string());
    }
    weights.push_back(t);
    saved.erase(it);
  }
  if (!saved.empty()) {
    throw ValueError(where + ": the file has variable '" + saved.begin()->first +
                     "', which model '" + name + "' does not have (" +
                     std::to_string(saved.size()) +
                     " extra; are these the weights of another model?)");
  }
  check_finite(file.tensors, "", options, where);
  model.set_weights(weights);
}

}  // namespace io::detail

}  // namespace mixprec
