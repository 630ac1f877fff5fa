// Reading one layer of a model config (model_from_json, include/mixprec/models/model_config.h):
// the checked options of every layer class. Internal to the config readers.
#pragma once

#include <cstddef>
#include <string>

#include "mixprec/layers/layer.h"
#include "mixprec/models/model_config.h"
#include "models/config_reader.h"

namespace mixprec::models::config {

inline constexpr std::size_t kMaxNameLength = 256;
inline constexpr std::size_t kMaxRank = 8;

// The non-empty name under `key` (at most kMaxNameLength characters).
std::string read_name(Object& c, const char* key = "name");

// A layer of class `cls` (any class but InputLayer and the models) from its config `c`, every key
// checked and c.finish()ed; ValueError naming the place and the key otherwise.
layers::Layer make_layer(const std::string& cls, Object& c, const ModelConfigLimits& limits);

}  // namespace mixprec::models::config
