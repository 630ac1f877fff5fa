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

void Model::save(const std::filesystem::path& dir) const {
  if (dir.empty()) throw ValueError("Model::save: the directory is empty");
  json config;
  config["format"] = kFormat;
  config["version"] = 1;
  config["model"] = json::parse(to_json());
  config["compile"] = nullptr;
  if (optimizer().defined()) {
    try {
      config["compile"] = json::parse(compile_config_to_json(*this));
    } catch (const ValueError& e) {
      log(LogLevel::warning, "Model::save: the compile settings of model '" + name() +
                                 "' are not saved (" + e.what() + "); compile() it after loading");
    }
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
    io::write_file_atomically(staging / "config.json", config.dump(1));
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

Model load_model(const std::filesystem::path& dir, const LoadOptions& options) {
  const std::filesystem::path config_path = dir / "config.json";
  const std::string text = read_config(config_path);
  // Checked on the text, before anything (the parser, dump(), a visitor) walks the document: a
  // deep value under any key, read or ignored, must not reach a recursion.
  const ModelConfigLimits defaults;
  const std::size_t max_depth =
      kConfigWrapperDepth + 16 + 8 * static_cast<std::size_t>(std::max(0, defaults.max_nesting));
  if (const std::string deep = io::json_depth_problem(text, max_depth); !deep.empty()) {
    throw IOError(config_path.string() + ": the saved model's config " + deep);
  }
  const json config = json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    throw IOError(config_path.string() + ": not valid JSON");
  }
  if (config.value("format", "") != kFormat || !config.contains("model")) {
    throw IOError(config_path.string() + ": not a saved mixprec model (\"format\" is not \"" +
                  kFormat + "\")");
  }
  if (!config.contains("version") || config["version"] != 1) {
    throw IOError(config_path.string() +
                  ": unsupported saved-model version (this mixprec reads 1)");
  }
  // The weights file is read (and its checksums verified) before the config builds anything: a
  // bad weights file is blamed on itself, not on the model the config describes. Its element
  // count then bounds the model the config may build, so that a config claiming more parameters
  // than the file holds is refused before any variable is allocated.
  const std::filesystem::path weights_path = dir / "model.safetensors";
  const io::SafetensorsContents weights = io::load_safetensors(weights_path);
  // At least 2 bytes an element (float16 or bfloat16) in a file of this size: a bound loose
  // enough that a config of another model of about this size builds and is refused by the
  // variable that differs when the weights are matched.
  std::error_code ec;
  const double stored = static_cast<double>(std::filesystem::file_size(weights_path, ec)) / 2;
  if (ec) throw IOError(weights_path.string() + ": cannot read its size: " + ec.message());
  ModelConfigLimits limits;
  const bool bounded_by_file = stored < static_cast<double>(limits.max_params);
  if (bounded_by_file) limits.max_params = static_cast<std::int64_t>(stored);
  Model model = [&] {
    try {
      return model_from_json(config["model"].dump(), limits);
    } catch (const ValueError& e) {
      throw ValueError(config_path.string() + ": " + e.what() +
                       (bounded_by_file && std::string_view(e.what()).find("max_params") !=
                                               std::string_view::npos
                            ? " (the limit is the " + std::to_string(limits.max_params) +
                                  " values of " + weights_path.string() +
                                  "; do the config and the weights belong to the same model?)"
                            : std::string()));
    }
  }();
  io::detail::apply_weights(model, weights, weights_path.string(), options);
  if (config.contains("compile") && !config["compile"].is_null()) {
    try {
      model.compile(compile_options_from_json(config["compile"].dump()));
    } catch (const ValueError& e) {
      throw ValueError(config_path.string() + ": " + e.what());
    }
  }
  return model;
}

}  // namespace mixprec
