// The writing half of the model config (include/mixprec/models/model_config.h): Model::to_json()
// and a functional model's get_config(), the graph as each layer's inbound nodes. The reader is
// model_config_reader.cpp.
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "layers/graph.h"
#include "mixprec/error.h"
#include "mixprec/models/model.h"
#include "models/model_impl.h"

namespace mixprec {
namespace models {

using nlohmann::json;

json layer_config_entry(const layers::Layer& layer) {
  return {{"class_name", layer.class_name()}, {"config", layer.impl().get_config()}};
}

json ModelImpl::get_config() const {
  require_graph("get_config");
  json config = json::object();
  config["name"] = name();
  config["trainable"] = trainable();

  // Which call of its layer each graph node is: the InputLayers' nodes are their node 0; the
  // other layers' calls are numbered in execution order (a shared layer has several).
  std::unordered_map<const layers::detail::GraphNode*, std::pair<std::string, int>> ids;
  for (const KerasTensor& in : inputs_) ids[in.data()->node.get()] = {in.layer().name(), 0};
  const auto ref = [&](const KerasTensor& t) {
    const auto it = ids.find(t.data()->node.get());
    if (it == ids.end()) {
      throw ValueError("model '" + name() + "': tensor " + t.name() +
                       " comes from outside the model's graph");
    }
    return json::array({it->second.first, it->second.second, t.data()->index});
  };
  std::unordered_map<const layers::LayerImpl*, json> inbound;
  for (const auto& node : nodes_) {
    json args = json::array();
    for (const KerasTensor& t : node->inputs) args.push_back(ref(t));
    json& calls = inbound[node->layer.impl_ptr().get()];
    if (calls.is_null()) calls = json::array();
    ids[node.get()] = {node->layer.name(), static_cast<int>(calls.size())};
    calls.push_back(std::move(args));
  }
  json entries = json::array();
  for (const layers::Layer& l : graph_layers_) {
    json entry = layer_config_entry(l);
    const auto it = inbound.find(l.impl_ptr().get());
    entry["inbound_nodes"] = it == inbound.end() ? json::array() : it->second;
    entries.push_back(std::move(entry));
  }
  config["layers"] = std::move(entries);
  json in = json::array(), out = json::array();
  for (const KerasTensor& t : inputs_) in.push_back(ref(t));
  for (const KerasTensor& t : outputs_) out.push_back(ref(t));
  config["input_layers"] = std::move(in);
  config["output_layers"] = std::move(out);
  return config;
}

}  // namespace models

std::string Model::to_json() const { return models::layer_config_entry(*this).dump(); }

}  // namespace mixprec
