// Sequential: a list of layers that becomes a chain-shaped functional graph as soon as the input
// shape is known (an InputLayer given first, or the first call).
#include "mixprec/models/sequential.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "layers/input_layer_impl.h"
#include "mixprec/error.h"
#include "models/model_impl.h"

namespace mixprec {
namespace models {

namespace {

class SequentialImpl final : public ModelImpl {
 public:
  explicit SequentialImpl(const SequentialOptions& o)
      : ModelImpl("Sequential", ModelOptions{o.name, o.trainable}, "sequential") {}

  std::vector<layers::Layer> layers() const override { return layers_; }

  // Keras' Sequential config: the layers in order, the InputLayer first when there is one (an
  // unbuilt model has none and is rebuilt unbuilt).
  nlohmann::json get_config() const override {
    nlohmann::json config = nlohmann::json::object();
    config["name"] = name();
    config["trainable"] = trainable();
    nlohmann::json entries = nlohmann::json::array();
    if (input_.defined()) entries.push_back(layer_config_entry(input_));
    for (const layers::Layer& l : layers_) entries.push_back(layer_config_entry(l));
    config["layers"] = std::move(entries);
    return config;
  }

  void add(const layers::Layer& layer) {
    if (!layer.defined()) throw ValueError(name() + ": add() got an undefined layer");
    if (dynamic_cast<layers::InputLayerImpl*>(layer.impl_ptr().get()) != nullptr) {
      if (!layers_.empty() || input_.defined()) {
        throw ValueError(name() + ": InputLayer '" + layer.name() +
                         "' must be the first layer of a Sequential model");
      }
      input_ = layer;
      rebuild();
      return;
    }
    layers_.push_back(layer);
    if (!input_.defined()) return;  // built on the first call
    try {
      rebuild();
    } catch (...) {
      layers_.pop_back();  // the model stays as it was
      rebuild();
      throw;
    }
  }

  void pop() {
    if (layers_.empty()) throw ValueError(name() + ": pop() on a Sequential model with no layers");
    layers_.pop_back();
    if (input_.defined()) rebuild();
  }

  // First call without an InputLayer: the input shape (batch unknown) and dtype of that call.
  void build_from_specs(const std::vector<TensorSpec>& inputs) override {
    if (input_.defined()) return;
    const PartialShape& shape = inputs[0].shape;
    if (shape.empty()) {
      throw ShapeError(name() +
                       ": a Sequential model needs inputs with a batch axis, got shape ()");
    }
    InputOptions options;
    options.dtype = inputs[0].dtype;
    input_ = layers::InputLayer(std::vector<std::int64_t>(shape.begin() + 1, shape.end()), options);
    try {
      rebuild();
    } catch (...) {
      input_ = layers::Layer();
      throw;
    }
  }

 private:
  // The chain Input -> layers_[0] -> ... as a functional graph.
  void rebuild() {
    const KerasTensor in = static_cast<layers::InputLayerImpl&>(input_.impl()).output(input_);
    KerasTensor x = in;
    for (const layers::Layer& l : layers_) {
      std::vector<KerasTensor> out = l.call_symbolic({x});
      if (out.size() != 1) {
        throw ValueError(name() + ": layer '" + l.name() + "' has " + std::to_string(out.size()) +
                         " outputs; a Sequential model needs layers with one output (use the "
                         "functional mp::Model for other graphs)");
      }
      x = out[0];
    }
    set_graph({in}, {x});
  }

  std::vector<layers::Layer> layers_;
  layers::Layer input_;  // an InputLayer, once the input shape is known
};

SequentialImpl& sequential_impl(const Model& m) {
  return static_cast<SequentialImpl&>(m.model_impl());
}

}  // namespace
}  // namespace models

Sequential::Sequential(SequentialOptions options)
    : Model(std::make_shared<models::SequentialImpl>(options)) {}

Sequential::Sequential(const std::vector<layers::Layer>& layers, SequentialOptions options)
    : Sequential(std::move(options)) {
  for (const layers::Layer& l : layers) add(l);
}

void Sequential::add(const layers::Layer& layer) { models::sequential_impl(*this).add(layer); }
void Sequential::pop() { models::sequential_impl(*this).pop(); }

}  // namespace mixprec
