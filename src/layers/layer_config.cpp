// LayerImpl::get_config / base_config and the shared option encoders (src/layers/layer_config.h).
#include "layers/layer_config.h"

#include "mixprec/error.h"
#include "mixprec/layers/layer.h"

namespace mixprec::layers {

nlohmann::json LayerImpl::get_config() const {
  throw ValueError("layer '" + name_ + "' (" + class_name_ +
                   "): this layer class does not describe its options (get_config), so a model "
                   "config cannot hold it; save the weights alone with save_weights()");
}

nlohmann::json LayerImpl::base_config() const {
  nlohmann::json config = nlohmann::json::object();
  config["name"] = name_;
  config["trainable"] = trainable_;
  config["dtype"] = policy_.name();
  return config;
}

namespace detail {

nlohmann::json initializer_config(const initializers::Initializer& init, const std::string& layer,
                                  const char* option) {
  const auto& params = init.get_config();
  if (!params) {
    throw ValueError("layer '" + layer + "': " + option + " '" + init.name() +
                     "' is a custom initializer function, which a model config cannot describe; "
                     "use a built-in initializer or save the weights alone with save_weights()");
  }
  if (params->empty()) return init.name();
  nlohmann::json config = nlohmann::json::object();
  for (const auto& [key, value] : *params) config[key] = value;
  return {{"class_name", init.name()}, {"config", config}};
}

}  // namespace detail
}  // namespace mixprec::layers
