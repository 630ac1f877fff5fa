// Saving and loading whole models (keras model.save / keras.models.load_model).
//
//   model.save("saved/mlp");                    // a directory
//   mp::Model again = mp::load_model("saved/mlp");
//   again.predict(x);                           // bit-identical to model.predict(x)
//   again.fit(x, y, {.epochs = 1});             // compiled as it was: training continues
//
// The directory holds:
//   config.json        {"format": "mixprec-saved-model", "version": 1, "model": <Model::to_json()>,
//                       "compile": <compile_config_to_json(), or null when not compiled>}
//   model.safetensors  every variable by name (Model::save_weights)
// Saving writes a new directory beside the target and renames it into place, so a crash leaves
// either the old model or the new one, never a mix. The optimizer's slots are not part of a saved
// model (use a training checkpoint, io::save_checkpoint, to continue a run exactly).
#pragma once

#include <filesystem>

#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// Loads a directory written by Model::save, or a training checkpoint file (io::save_checkpoint,
// written by ModelCheckpoint and BackupAndRestore), which holds the same architecture and compile
// settings: from a checkpoint, the model part (weights), without the optimizer's state. IOError
// for a missing or malformed file, and for a file of another kind, naming the kind found and the
// call that reads it (a weights file: Model::load_weights); ValueError for a config that does not
// describe a valid model or weights that do not fit it; the message names the file. A model saved
// without compile settings (or with a custom loss or metric) is returned uncompiled. The weights
// are read and verified first (their checksums, and finite values unless
// options.allow_nonfinite; see Model::load_weights), so that their errors name their file.
Model load_model(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace mixprec

#pragma GCC visibility pop
