// The state behind mp::Model (and mp::Sequential): the functional graph in execution order and
// the hooks that make a model a layer. Internal; the training loop (src/models/training.cpp,
// train_step.cpp, fit.cpp, evaluate.cpp) includes it to reach the graph and to keep its own state
// in `training`.
//
// Forward pass for a training loop: forward(inputs, {.training = true}) (the same as the public
// model(x, options)); variables: named_variables() / the handle's trainable_variables().
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/graph.h"
#include "mixprec/models/model.h"

namespace mixprec::models {

// Defined by the training loop (compile/fit state: optimizer, losses, metrics, history). Held by
// shared_ptr so that this header needs only the declaration.
struct TrainingState;
// The running fit()'s position (src/models/fit_run.h), for checkpoints; null outside fit().
struct FitRun;

class ModelImpl : public layers::LayerImpl {
 public:
  // `name_prefix` is the automatic name's stem ("model", "sequential").
  ModelImpl(std::string class_name, const ModelOptions& options, const std::string& name_prefix);

  // Installs the graph from `inputs` to `outputs`: checks that the inputs are distinct mp::Input
  // tensors, that every output is reachable from them, and that layer names are unique; orders the
  // nodes for execution. Throws ValueError, leaving the previous graph in place.
  void set_graph(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs);
  bool has_graph() const { return !outputs_.empty(); }
  // ValueError (naming the model and saying how to build it) when there is no graph yet.
  void require_graph(const char* what) const;

  const std::vector<KerasTensor>& inputs() const { return inputs_; }
  const std::vector<KerasTensor>& outputs() const { return outputs_; }
  // The layer calls in execution order (InputLayer nodes excluded).
  const std::vector<std::shared_ptr<layers::detail::GraphNode>>& nodes() const { return nodes_; }
  // Functional: the graph's layers in execution order, InputLayers first. Sequential overrides.
  virtual std::vector<layers::Layer> layers() const;

  // Runs the graph on real tensors. Floating inputs are converted to their Input's dtype; each
  // layer then autocasts for itself. Intermediate results are released once their last consumer
  // has run (that matters for inference under NoGradScope).
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs, const CallOptions& options);

  // ---- LayerImpl ----
  bool autocasts() const override { return false; }
  // {"name", "trainable", "layers", "input_layers", "output_layers"} (model_config.h); the
  // Sequential override lists its layers instead of a graph. src/models/model_config.cpp.
  nlohmann::json get_config() const override;
  std::vector<layers::NamedVariable> named_variables() const override;
  void set_trainable(bool trainable) override;
  void validate_input_count(std::size_t count) const override;
  void validate(const std::vector<PartialShape>& shapes) const override;
  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override;
  std::vector<TensorSpec> compute_output_spec(const std::vector<TensorSpec>& inputs) const override;
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override;

  // compile()/fit() state, owned by the training loop; null until compile().
  std::shared_ptr<TrainingState> training;
  // Set while fit() runs (callbacks that save or restore checkpoints read and write it).
  FitRun* fit_run = nullptr;
  // Keras's model.stop_training.
  bool stop_training = false;

 protected:
  std::vector<KerasTensor> inputs_, outputs_;
  std::vector<std::shared_ptr<layers::detail::GraphNode>> nodes_;  // execution order
  std::vector<layers::Layer> graph_layers_;                        // InputLayers, then by node
  // Where a value comes from: output `index` of nodes_[node], or model input -1 - node.
  struct Source {
    int node;
    int index;
  };
  std::vector<std::vector<Source>> sources_;  // per node, its inputs
  std::vector<Source> output_sources_;
  // For each node, how many reads there are of its outputs in the forward pass (model outputs
  // count as one each); lets forward() free intermediates after their last reader.
  std::vector<int> reads_;

 private:
  std::vector<TensorSpec> standardize(const std::vector<TensorSpec>& inputs) const;
  Tensor standardize(std::size_t i, const Tensor& x) const;
};

// {"class_name": <the layer's class>, "config": <its get_config()>} (src/models/model_config.cpp).
nlohmann::json layer_config_entry(const layers::Layer& layer);

}  // namespace mixprec::models
