// Helpers for the layers' get_config() (LayerImpl::get_config, include/mixprec/layers/layer.h):
// the JSON forms of the option types several layers share. The reader side, which validates a
// config before building anything, is src/models/model_config_reader.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/conv2d.h"

namespace mixprec::layers::detail {

// "glorot_uniform" for a parameterless built-in; {"class_name": "random_normal", "config":
// {"mean": 0, "stddev": 0.05}} for one with parameters. ValueError naming the layer and the option
// for a custom initializer function (a config cannot describe code).
nlohmann::json initializer_config(const initializers::Initializer& init, const std::string& layer,
                                  const char* option);
// [height, width]
inline nlohmann::json size2d_config(const Size2d& s) { return {s.height, s.width}; }

}  // namespace mixprec::layers::detail
