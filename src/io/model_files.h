// What Model::save / load_model, Model::load_weights and the training checkpoints share: the saved
// model's config (config.json, also stored in every checkpoint) and reading a model's variables
// out of a loaded safetensors file, whether a weights file or a checkpoint.
#pragma once

#include <string>

#include "mixprec/io/safetensors.h"
#include "mixprec/models/model.h"

namespace mixprec::io::detail {

inline constexpr const char* kWeightsFormat = "mixprec-weights";        // Model::save_weights
inline constexpr const char* kCheckpointFormat = "mixprec-checkpoint";  // io::save_checkpoint
// The checkpoint's __metadata__ key holding saved_model_config(model).
inline constexpr const char* kCheckpointModelConfigKey = "model_config";

// config.json of Model::save: {"format": "mixprec-saved-model", "version": 1, "model":
// Model::to_json(), "compile": compile_config_to_json() or null}. ValueError when the model has a
// part to_json cannot describe (a custom layer); compile settings that cannot be described are
// left out (null) and reported through `compile_note` when it is not null.
std::string saved_model_config(const Model& model, std::string* compile_note = nullptr);

// The "format" of a safetensors file's __metadata__ ("" when none).
std::string file_format(const SafetensorsContents& file);

// Writes the model's variables from `file`: every variable by name, or, for a training checkpoint,
// the tensors of its "model/" part. Every name, shape and dtype is checked first (ValueError
// naming `where`, the variable and the kind of file); on any error the model is untouched.
void load_weights_from(Model& model, const SafetensorsContents& file, const std::string& where);

}  // namespace mixprec::io::detail
