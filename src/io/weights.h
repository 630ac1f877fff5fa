// Applying a safetensors file's tensors to a model (Model::load_weights, load_model), split from
// the reading so that load_model reads the weights file once, and first. Internal to src/io.
#pragma once

#include <string>

#include "mixprec/io/load_options.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/models/model.h"

namespace mixprec::io::detail {

// Every check first (names, shapes, dtypes, nothing extra, finite values unless allowed; each
// error names `where`), then the model's variables are set; on any error the model is untouched.
void apply_weights(Model& model, const SafetensorsContents& file, const std::string& where,
                   const LoadOptions& options);

}  // namespace mixprec::io::detail
