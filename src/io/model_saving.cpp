// Model::save and load_model (include/mixprec/models/saving.h).
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>

#include "io/atomic_file.h"
#include "io/json_limits.h"
#include "io/model_files.h"
#include "io/weights.h"
#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/logging.h"
#include "mixprec/models/model_config.h"
#include "mixprec/models/saving.h"

namespace mixprec {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "mixprec-saved-model";
constexpr std::uintmax_t kMaxConfigBytes = 64u << 20;  // a ResNet-50 config is ~200 KB
// The levels config.json adds around the model config ({"model": ...}).
constexpr std::size_t kConfigWrapperDepth = 2;

std::string read_config(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw IOError(path.string() + ": cannot read the saved model's config: " + ec.message());
  if (size > kMaxConfigBytes) {
    throw IOError(path.string() + ": the config is " + std::to_string(size) +
                  " bytes, more than the 64 MiB a model config can be");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw IOError(path.string() + ": reading the config failed: " + std::strerror(errno));
  return text.str();
}

void remove_quietly(const std::filesystem::path& p) {
  std::error_code ignored;
  std::filesystem::remove_all(p, ignored);
}

// Makes a rename in `dir` durable.
void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Puts the complete `staging` directory in the place of `target`. When target exists the two are
// exchanged in one atomic step (renameat2 RENAME_EXCHANGE), so at every moment `target` names
// either the old model or the new one; `staging` then holds the old one, for the caller to remove.
// Filesystems without the exchange fall back to two renames (a window in which target is missing,
// never one in which it is a mix).
void replace_directory(const std::filesystem::path& staging, const std::filesystem::path& target,
                       const std::filesystem::path& old) {
  if (std::filesystem::exists(target)) {
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      fsync_directory(target.parent_path());
      remove_quietly(staging);  // the old model now
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) {
      throw IOError("Model::save: cannot replace '" + target.string() +
                    "': " + std::strerror(errno));
    }
    std::filesystem::rename(target, old);
  }
  std::filesystem::rename(staging, target);
  fsync_directory(target.parent_path());
}

}  // namespace

namespace io::detail {

std::string saved_model_config(const Model& model, std::string* compile_note) {
  json config;
  config["format"] = kFormat;
  config["version"] = 1;
  config["model"] = json::parse(model.to_json());
  config["compile"] = nullptr;
  if (model.optimizer().defined()) {
    try {
      config["compile"] = json::parse(compile_config_to_json(model));
    } catch (const ValueError& e) {
      if (compile_note != nullptr) *compile_note = e.what();
    }
  }
  return config.dump(1);
}

}  // namespace io::detail

void Model::save(const std::filesystem::path& dir) const {
  if (dir.empty()) throw ValueError("Model::save: the directory is empty");
  std::string compile_note;
  const std::string config = io::detail::saved_model_config(*this, &compile_note);
  if (!compile_note.empty()) {
    log(LogLevel::warning, "Model::save: the compile settings of model '" + name() +
                               "' are not saved (" + compile_note +
                               "); compile() it after loading");
  }
  // Written beside the target, then renamed into place.
  std::filesystem::path target = std::filesystem::absolute(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "saved/mlp/"
  const std::string stem = target.filename().string();
  const std::filesystem::path staging =
      target.parent_path() / ("." + stem + ".saving." + std::to_string(::getpid()));
  const std::filesystem::path old =
      target.parent_path() / ("." + stem + ".old." + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  remove_quietly(staging);
  std::filesystem::create_directories(staging, ec);
  if (ec) throw IOError("Model::save: cannot create '" + staging.string() + "': " + ec.message());
  try {
    io::write_file_atomically(staging / "config.json", config);
    save_weights(staging / "model.safetensors");
    replace_directory(staging, target, old);
  } catch (const std::filesystem::filesystem_error& e) {
    remove_quietly(staging);
    throw IOError(std::string("Model::save: ") + e.what());
  } catch (...) {
    remove_quietly(staging);
    throw;
  }
  remove_quietly(old);
}

namespace {

// The model a saved config describes, with the weights `load_weights` writes and compiled as it
// was. `where` names the config in errors. The weights were read (and their checksums verified)
// before this is called, so that a bad weights file is blamed on itself, not on the model the
// config describes; their file's size then bounds the model the config may build: every
// variable is stored with at least 2 bytes an element (float16 or bfloat16), a bound loose
// enough that a config of another model of about this size builds and is refused by the variable
// that differs when the weights are matched, while a config claiming more parameters than the
// file holds is refused before any variable is allocated.
template <typename LoadWeights>
Model build_saved_model(const std::string& text, const std::string& where,
                        const std::string& weights_where, std::uintmax_t weights_bytes,
                        LoadWeights load_weights) {
  // Checked on the text, before anything (the parser, dump(), a visitor) walks the document: a
  // deep value under any key, read or ignored, must not reach a recursion.
  const ModelConfigLimits defaults;
  const std::size_t max_depth =
      kConfigWrapperDepth + 16 + 8 * static_cast<std::size_t>(std::max(0, defaults.max_nesting));
  if (const std::string deep = io::json_depth_problem(text, max_depth); !deep.empty()) {
    throw IOError(where + ": the saved model's config " + deep);
  }
  const json config = json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) throw IOError(where + ": not valid JSON");
  if (config.value("format", "") != kFormat || !config.contains("model")) {
    throw IOError(where + ": not a saved mixprec model (\"format\" is not \"" + kFormat + "\")");
  }
  if (!config.contains("version") || config["version"] != 1) {
    throw IOError(where + ": unsupported saved-model version (this mixprec reads 1)");
  }
  ModelConfigLimits limits;
  const double stored = static_cast<double>(weights_bytes) / 2;
  const bool bounded_by_file = stored < static_cast<double>(limits.max_params);
  if (bounded_by_file) limits.max_params = static_cast<std::int64_t>(stored);
  Model model = [&] {
    try {
      return model_from_json(config["model"].dump(), limits);
    } catch (const ValueError& e) {
      throw ValueError(
          where + ": " + e.what() +
          (bounded_by_file &&
                   std::string_view(e.what()).find("max_params") != std::string_view::npos
               ? " (the limit is the " + std::to_string(limits.max_params) + " values of " +
                     weights_where + "; do the config and the weights belong to the same model?)"
               : std::string()));
    }
  }();
  load_weights(model);
  if (config.contains("compile") && !config["compile"].is_null()) {
    try {
      model.compile(compile_options_from_json(config["compile"].dump()));
    } catch (const ValueError& e) {
      throw ValueError(where + ": " + e.what());
    }
  }
  return model;
}

// load_model of a file: a training checkpoint (its model part), or a clear refusal naming the
// kind of file found and the call that reads it.
Model load_model_file(const std::filesystem::path& path, const LoadOptions& options) {
  const std::string where = path.string();
  const std::string readers =
      "load_model() reads a directory written by Model::save or a training checkpoint written "
      "by io::save_checkpoint, ModelCheckpoint or BackupAndRestore";
  io::SafetensorsContents file;
  try {
    file = io::load_safetensors(path);
  } catch (const IOError& e) {
    throw IOError(std::string(e.what()) + "; " + readers);
  }
  const std::string format = io::detail::file_format(file);
  if (format == io::detail::kWeightsFormat) {
    throw IOError(where +
                  ": a weights file (Model::save_weights) holds the variables but not the " +
                  "architecture; build the model and call model.load_weights(\"" + where +
                  "\"), or " + readers);
  }
  if (format != io::detail::kCheckpointFormat) {
    throw IOError(where + ": a safetensors file that is neither a mixprec checkpoint nor a saved " +
                  "model (its __metadata__ \"format\" is \"" + format + "\"); " + readers);
  }
  const auto config = file.metadata.find(io::detail::kCheckpointModelConfigKey);
  if (config == file.metadata.end()) {
    throw IOError(where + ": a training checkpoint without its model's architecture (the " +
                  "model has a part that cannot be described, such as a custom layer); build " +
                  "the model and call model.load_weights(\"" + where +
                  "\") for its weights, or io::load_checkpoint(model, \"" + where +
                  "\") to resume training");
  }
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  return build_saved_model(config->second, where + " (the checkpoint's model config)", where,
                           ec ? std::uintmax_t{0} : bytes, [&](Model& model) {
                             io::detail::apply_weights(model, file, where, options);
                           });
}

}  // namespace

Model load_model(const std::filesystem::path& path, const LoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return load_model_file(path, options);
  if (!std::filesystem::is_directory(path, ec)) {
    throw IOError(path.string() + ": no such file or directory; load_model() reads a directory " +
                  "written by Model::save or a training checkpoint file (io::save_checkpoint, " +
                  "ModelCheckpoint, BackupAndRestore)");
  }
  const std::filesystem::path config_path = path / "config.json";
  const std::filesystem::path weights_path = path / "model.safetensors";
  // The config's text (a missing or unreadable config.json is named), then the weights, read and
  // verified before the config builds anything: their errors (a short or damaged file, a
  // checksum) name their file, not the model the config describes.
  const std::string text = read_config(config_path);
  const io::SafetensorsContents weights = io::load_safetensors(weights_path);
  std::error_code size_ec;
  const std::uintmax_t bytes = std::filesystem::file_size(weights_path, size_ec);
  if (size_ec) {
    throw IOError(weights_path.string() +
                  ": cannot read the saved model's weights: " + size_ec.message());
  }
  return build_saved_model(
      text, config_path.string(), weights_path.string(), bytes, [&](Model& model) {
        io::detail::apply_weights(model, weights, weights_path.string(), options);
      });
}

}  // namespace mixprec
