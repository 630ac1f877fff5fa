// Functional models: graph checks and ordering, the forward pass, and the Model handle.
#include "mixprec/models/model.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "layers/activation_fusion.h"
#include "layers/add_norm_fusion.h"
#include "layers/input_layer_impl.h"
#include "layers/naming.h"
#include "mixprec/error.h"
#include "models/model_impl.h"
#include "ops/batch_norm_activation.h"

namespace mixprec {
namespace models {

namespace {

using layers::detail::GraphNode;

bool is_input_node(const GraphNode& node) {
  return node.inputs.empty() &&
         dynamic_cast<const layers::InputLayerImpl*>(node.layer.impl_ptr().get()) != nullptr;
}

layers::LayerOptions layer_options(const ModelOptions& o, const std::string& prefix) {
  layers::LayerOptions lo;
  lo.name = o.name.empty() ? layers::detail::unique_name(prefix) : o.name;
  lo.trainable = o.trainable;
  return lo;
}

std::string shape_str(const PartialShape& s) { return partial_shape_to_string(s); }

// Whether node j (about to run on `args`) and a later node k run as one fused op: node j a
// BatchNormalization with one input, or an Add (its relu only), with one output read once (so not
// a model output), by an Activation node k whose only input it is, of an activation the fused op
// applies, computing in node j's output dtype. Returns k and the activation. (Sources:
// ModelImpl's.)
template <typename Source>
std::optional<std::pair<std::size_t, UnaryOp>> fusable_activation_after(
    std::size_t j, const std::vector<Tensor>& args,
    const std::vector<std::shared_ptr<GraphNode>>& nodes_,
    const std::vector<std::vector<Source>>& sources_, const std::vector<int>& reads_) {
  if (!ops::batch_norm_activation_fusion_enabled() || args.empty() || reads_[j] != 1 ||
      nodes_[j]->outputs.size() != 1) {
    return std::nullopt;
  }
  const layers::Layer& layer = nodes_[j]->layer;
  const DType in = args[0].dtype();
  std::optional<DType> out;
  bool relu_only = false;
  if (args.size() == 1) {
    out = layers::detail::fusable_batch_norm_output(layer, in);
  } else {
    out = layers::detail::fusable_add_output(layer, in);
    relu_only = true;
  }
  if (!out) return std::nullopt;
  for (std::size_t k = j + 1; k < nodes_.size(); ++k) {
    const std::vector<Source>& in_k = sources_[k];
    const bool reads_j = std::any_of(
        in_k.begin(), in_k.end(), [&](const Source& s) { return s.node == static_cast<int>(j); });
    if (!reads_j) continue;
    if (in_k.size() != 1) return std::nullopt;
    const auto act = layers::detail::fusable_activation_layer(nodes_[k]->layer, *out);
    if (!act || (relu_only && *act != UnaryOp::relu)) return std::nullopt;
    return std::make_pair(k, *act);
  }
  return std::nullopt;
}

// Whether node j (about to run on `args`) computes its sum through the fused Add + normalization
// op for a later node k: node j an Add of two inputs of one shape and dtype with one output, node
// k the first of its readers that is a LayerNormalization or RMSNormalization whose only input it
// is and that computes in the Add's output dtype. Unlike the activation fusions the sum may
// have other readers (the residual stream goes on to the next Add): it stays a value of node j.
// Returns k. (Sources: ModelImpl's.)
template <typename Source>
std::optional<std::size_t> fusable_norm_after(std::size_t j, const std::vector<Tensor>& args,
                                              const std::vector<std::shared_ptr<GraphNode>>& nodes_,
                                              const std::vector<std::vector<Source>>& sources_) {
  if (!ops::batch_norm_activation_fusion_enabled() || args.size() != 2 ||
      nodes_[j]->outputs.size() != 1 || args[0].shape() != args[1].shape() ||
      args[0].dtype() != args[1].dtype()) {
    return std::nullopt;
  }
  const auto out = layers::detail::fusable_add_output(nodes_[j]->layer, args[0].dtype());
  if (!out) return std::nullopt;
  for (std::size_t k = j + 1; k < nodes_.size(); ++k) {
    const std::vector<Source>& in_k = sources_[k];
    const bool reads_j = std::any_of(
        in_k.begin(), in_k.end(), [&](const Source& s) { return s.node == static_cast<int>(j); });
    if (!reads_j) continue;
    if (in_k.size() != 1 || !layers::detail::fusable_norm_layer(nodes_[k]->layer, *out)) continue;
    return k;
  }
  return std::nullopt;
}

}  // namespace

ModelImpl::ModelImpl(std::string class_name, const ModelOptions& options,
                     const std::string& name_prefix)
    : LayerImpl(std::move(class_name), layer_options(options, name_prefix)) {}

void ModelImpl::require_graph(const char* what) const {
  if (!has_graph()) {
    throw ValueError(name() + ": " + what + " needs a built model; this " + class_name() +
                     " has no input shape yet: start it with mp::layers::InputLayer({...}) or call "
                     "it once on data");
  }
}

void ModelImpl::set_graph(std::vector<KerasTensor> inputs, std::vector<KerasTensor> outputs) {
  if (inputs.empty()) throw ValueError(name() + ": a model needs at least one input");
  if (outputs.empty()) throw ValueError(name() + ": a model needs at least one output");
  std::unordered_map<const GraphNode*, int> input_position;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const KerasTensor& t = inputs[i];
    if (!t.defined()) throw ValueError(name() + ": input " + std::to_string(i) + " is undefined");
    if (!is_input_node(*t.data()->node)) {
      throw ValueError(name() + ": input " + std::to_string(i) + " is the output of layer '" +
                       t.layer().name() + "' (" + t.layer().class_name() +
                       "); model inputs must be mp::Input(...) tensors");
    }
    if (!input_position.emplace(t.data()->node.get(), static_cast<int>(i)).second) {
      throw ValueError(name() + ": input '" + t.layer().name() + "' is given twice");
    }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) {
      throw ValueError(name() + ": output " + std::to_string(i) + " is undefined");
    }
  }

  // Post-order depth-first walk from the outputs: every node comes after the nodes it reads.
  std::vector<std::shared_ptr<GraphNode>> order;
  std::unordered_map<const GraphNode*, int> position;
  struct Frame {
    std::shared_ptr<GraphNode> node;
    std::size_t next = 0;
  };
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const std::shared_ptr<GraphNode>& root = outputs[o].data()->node;
    if (input_position.count(root.get()) || position.count(root.get())) continue;
    if (is_input_node(*root)) {
      throw ValueError(name() + ": output " + std::to_string(o) + " is Input '" +
                       root->layer.name() + "', which is not among the model's inputs");
    }
    std::vector<Frame> stack{{root}};
    std::unordered_set<const GraphNode*> on_stack{root.get()};
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.node->inputs.size()) {
        const std::shared_ptr<GraphNode>& child = f.node->inputs[f.next++].data()->node;
        if (input_position.count(child.get()) || position.count(child.get()) ||
            on_stack.count(child.get())) {
          continue;
        }
        if (is_input_node(*child)) {
          throw ValueError(name() + ": output " + std::to_string(o) + " ('" +
                           outputs[o].layer().name() + "') depends on Input '" +
                           child->layer.name() +
                           "', which is not among the model's inputs; add it to `inputs`");
        }
        on_stack.insert(child.get());
        stack.push_back({child});
        continue;
      }
      position.emplace(f.node.get(), static_cast<int>(order.size()));
      order.push_back(f.node);
      on_stack.erase(f.node.get());
      stack.pop_back();
    }
  }

  // Layers: the inputs' InputLayers, then each node's layer at its first use.
  std::vector<layers::Layer> graph_layers;
  std::unordered_set<const layers::LayerImpl*> seen;
  std::unordered_map<std::string, const layers::LayerImpl*> by_name;
  auto add_layer = [&](const layers::Layer& l) {
    if (!seen.insert(l.impl_ptr().get()).second) return;
    const auto [it, fresh] = by_name.emplace(l.name(), l.impl_ptr().get());
    if (!fresh) {
      throw ValueError(name() + ": two different layers are named '" + l.name() +
                       "'; layer names must be unique within a model, rename one of them");
    }
    graph_layers.push_back(l);
  };
  for (const KerasTensor& t : inputs) add_layer(t.data()->node->layer);
  for (const auto& n : order) add_layer(n->layer);

  // Where each node's inputs and the model's outputs come from, and how often each is read.
  auto source_of = [&](const KerasTensor& t) {
    const GraphNode* n = t.data()->node.get();
    if (auto it = input_position.find(n); it != input_position.end())
      return Source{-1 - it->second, 0};
    return Source{position.at(n), t.data()->index};
  };
  std::vector<std::vector<Source>> sources(order.size());
  std::vector<int> reads(order.size(), 0);
  for (std::size_t j = 0; j < order.size(); ++j) {
    for (const KerasTensor& t : order[j]->inputs) {
      sources[j].push_back(source_of(t));
      if (sources[j].back().node >= 0) ++reads[static_cast<std::size_t>(sources[j].back().node)];
    }
  }
  std::vector<Source> output_sources;
  for (const KerasTensor& t : outputs) {
    output_sources.push_back(source_of(t));
    if (output_sources.back().node >= 0)
      ++reads[static_cast<std::size_t>(output_sources.back().node)];
  }

  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
  nodes_ = std::move(order);
  graph_layers_ = std::move(graph_layers);
  sources_ = std::move(sources);
  output_sources_ = std::move(output_sources);
  reads_ = std::move(reads);
  set_built(true);
}

std::vector<layers::Layer> ModelImpl::layers() const { return graph_layers_; }

std::vector<layers::NamedVariable> ModelImpl::named_variables() const {
  std::vector<layers::NamedVariable> out;
  std::unordered_set<const TensorImpl*> seen;  // a layer shared with a nested model counts once
  for (const layers::Layer& l : layers()) {
    for (layers::NamedVariable& v : l.named_variables()) {
      if (!seen.insert(v.value.impl()).second) continue;
      v.trainable = v.trainable && trainable();
      out.push_back(std::move(v));
    }
  }
  return out;
}

void ModelImpl::set_trainable(bool trainable) {
  LayerImpl::set_trainable(trainable);
  for (const layers::Layer& l : layers()) l.set_trainable(trainable);
}

void ModelImpl::validate_input_count(std::size_t count) const {
  const std::size_t expected = has_graph() ? inputs_.size() : 1;
  if (count != expected) {
    throw ValueError(name() + ": this model takes " + std::to_string(expected) + " input" +
                     (expected == 1 ? "" : "s") + ", got " + std::to_string(count));
  }
}

void ModelImpl::validate(const std::vector<PartialShape>& shapes) const {
  if (!has_graph()) return;  // an unbuilt Sequential: its layers check on the first call
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const PartialShape& want = inputs_[i].shape();
    const PartialShape& got = shapes[i];
    bool ok = want.size() == got.size();
    for (std::size_t k = 0; ok && k < got.size(); ++k) {
      if (want[k] >= 0 && got[k] >= 0 && want[k] != got[k]) ok = false;
    }
    if (!ok) {
      throw ShapeError(name() + ": input '" + inputs_[i].layer().name() + "' expects shape " +
                       shape_str(want) + ", got " + shape_str(got));
    }
  }
}

std::vector<TensorSpec> ModelImpl::standardize(const std::vector<TensorSpec>& inputs) const {
  std::vector<TensorSpec> out = inputs;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const DType want = inputs_[i].dtype();
    if (!is_floating(want) && is_floating(out[i].dtype)) {
      throw DTypeError(name() + ": input '" + inputs_[i].layer().name() + "' is " +
                       std::string(dtype_name(want)) + ", got a " +
                       std::string(dtype_name(out[i].dtype)) + " tensor");
    }
    out[i].dtype = want;
  }
  return out;
}

Tensor ModelImpl::standardize(std::size_t i, const Tensor& x) const {
  const DType want = inputs_[i].dtype();
  if (x.dtype() == want) return x;
  if (!is_floating(want) && is_floating(x.dtype())) {
    throw DTypeError(name() + ": input '" + inputs_[i].layer().name() + "' is " +
                     std::string(dtype_name(want)) + ", got a " +
                     std::string(dtype_name(x.dtype())) + " tensor; convert it first");
  }
  return x.to(want);
}

std::vector<TensorSpec> ModelImpl::compute_output_spec(
    const std::vector<TensorSpec>& inputs) const {
  require_graph("compute_output_spec");
  const std::vector<TensorSpec> in = standardize(inputs);
  std::vector<std::vector<TensorSpec>> values(nodes_.size());
  auto value = [&](const Source& s) {
    return s.node < 0 ? in[static_cast<std::size_t>(-1 - s.node)]
                      : values[static_cast<std::size_t>(s.node)][static_cast<std::size_t>(s.index)];
  };
  for (std::size_t j = 0; j < nodes_.size(); ++j) {
    std::vector<TensorSpec> args;
    for (const Source& s : sources_[j]) args.push_back(value(s));
    values[j] = nodes_[j]->layer.impl().call_spec(args);
  }
  std::vector<TensorSpec> out;
  for (const Source& s : output_sources_) out.push_back(value(s));
  return out;
}

std::vector<PartialShape> ModelImpl::compute_output_shape(
    const std::vector<PartialShape>& shapes) const {
  require_graph("compute_output_shape");
  std::vector<TensorSpec> specs;
  for (std::size_t i = 0; i < shapes.size(); ++i) specs.push_back({shapes[i], inputs_[i].dtype()});
  std::vector<PartialShape> out;
  for (TensorSpec& s : compute_output_spec(specs)) out.push_back(std::move(s.shape));
  return out;
}

std::vector<Tensor> ModelImpl::forward(const std::vector<Tensor>& inputs,
                                       const CallOptions& options) {
  require_graph("forward");
  validate_input_count(inputs.size());
  std::vector<PartialShape> shapes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw ValueError(name() + ": input " + std::to_string(i) + " is an undefined tensor");
    }
    shapes.push_back(to_partial_shape(inputs[i].shape()));
  }
  validate(shapes);
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < inputs.size(); ++i) in.push_back(standardize(i, inputs[i]));

  std::vector<std::vector<Tensor>> values(nodes_.size());
  std::vector<int> remaining = reads_;
  auto value = [&](const Source& s) -> const Tensor& {
    return s.node < 0 ? in[static_cast<std::size_t>(-1 - s.node)]
                      : values[static_cast<std::size_t>(s.node)][static_cast<std::size_t>(s.index)];
  };
  // fused_into[k] = j: node k is an Activation that node j (a BatchNormalization or an Add) ran
  // fused.
  std::vector<int> fused_into(nodes_.size(), -1);
  // normalized[k] defined: node k is a normalization whose output the Add before it computed.
  std::vector<Tensor> normalized(nodes_.size());
  for (std::size_t j = 0; j < nodes_.size(); ++j) {
    std::vector<Tensor> args;
    for (const Source& s : sources_[j]) args.push_back(value(s));
    if (fused_into[j] >= 0) {
      values[j] = values[static_cast<std::size_t>(fused_into[j])];  // act(bn(x)), relu(a + b)
    } else if (normalized[j].defined()) {
      values[j] = {std::move(normalized[j])};  // layer_norm(a + b)
    } else if (const auto fused = fusable_activation_after(j, args, nodes_, sources_, reads_)) {
      layers::detail::FusedActivationScope scope(fused->second);
      values[j] = nodes_[j]->layer.impl().call_eager(args, options);
      fused_into[static_cast<std::size_t>(fused->first)] = static_cast<int>(j);
    } else if (const auto k = fusable_norm_after(j, args, nodes_, sources_)) {
      // The Add returns the sum; the normalization's output waits in `normalized` for node k (or
      // is undefined where the Add did not fuse after all: node k then runs as usual).
      layers::detail::AddNormScope scope(nodes_[*k]->layer);
      values[j] = nodes_[j]->layer.impl().call_eager(args, options);
      normalized[*k] = scope.y();
    } else {
      values[j] = nodes_[j]->layer.impl().call_eager(args, options);
    }
    if (values[j].size() != nodes_[j]->outputs.size()) {
      throw ValueError(name() + ": layer '" + nodes_[j]->layer.name() + "' returned " +
                       std::to_string(values[j].size()) + " outputs, its graph node has " +
                       std::to_string(nodes_[j]->outputs.size()));
    }
    for (const Source& s : sources_[j]) {
      if (s.node >= 0 && --remaining[static_cast<std::size_t>(s.node)] == 0) {
        values[static_cast<std::size_t>(s.node)].clear();  // last reader done
      }
    }
  }
  std::vector<Tensor> out;
  for (const Source& s : output_sources_) out.push_back(value(s));
  return out;
}

std::vector<Tensor> ModelImpl::call(const std::vector<Tensor>& inputs, const CallOptions& options) {
  return forward(inputs, options);
}

}  // namespace models

// ---- the handle ----

Model::Model(std::shared_ptr<models::ModelImpl> impl) : layers::Layer(std::move(impl)) {}

Model::Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
             ModelOptions options)
    : Model(std::make_shared<models::ModelImpl>("Functional", options, "model")) {
  model_impl().set_graph(inputs, outputs);
  // A model made frozen freezes its layers, as set_trainable(false) does (a BatchNormalization
  // inside then stays in inference mode).
  if (!options.trainable) model_impl().set_trainable(false);
}

Model::Model(const KerasTensor& inputs, const KerasTensor& outputs, ModelOptions options)
    : Model(std::vector{inputs}, std::vector{outputs}, std::move(options)) {}
Model::Model(const std::vector<KerasTensor>& inputs, const KerasTensor& outputs,
             ModelOptions options)
    : Model(inputs, std::vector{outputs}, std::move(options)) {}
Model::Model(const KerasTensor& inputs, const std::vector<KerasTensor>& outputs,
             ModelOptions options)
    : Model(std::vector{inputs}, outputs, std::move(options)) {}

Model::Model(const layers::Layer& layer) : layers::Layer(layer) {
  if (dynamic_cast<models::ModelImpl*>(&impl()) == nullptr) {
    throw ValueError("Model: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a model");
  }
}

models::ModelImpl& Model::model_impl() const { return static_cast<models::ModelImpl&>(impl()); }

const std::vector<KerasTensor>& Model::inputs() const {
  model_impl().require_graph("inputs()");
  return model_impl().inputs();
}

const std::vector<KerasTensor>& Model::outputs() const {
  model_impl().require_graph("outputs()");
  return model_impl().outputs();
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> out;
  for (const KerasTensor& t : inputs()) out.push_back(t.layer().name());
  return out;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> out;
  for (const KerasTensor& t : outputs()) out.push_back(t.layer().name());
  return out;
}

std::vector<layers::Layer> Model::layers() const { return model_impl().layers(); }

layers::Layer Model::get_layer(std::string_view layer_name) const {
  const std::vector<layers::Layer> all = layers();
  std::string names;
  for (const layers::Layer& l : all) {
    if (l.name() == layer_name) return l;
    names += (names.empty() ? "" : ", ") + l.name();
  }
  throw ValueError(name() + ": no layer named '" + std::string(layer_name) +
                   "'; its layers are: " + (names.empty() ? std::string("(none)") : names));
}

layers::Layer Model::get_layer(int index) const {
  const std::vector<layers::Layer> all = layers();
  if (index < 0 || static_cast<std::size_t>(index) >= all.size()) {
    throw ValueError(name() + ": layer index " + std::to_string(index) + " is out of range; the " +
                     "model has " + std::to_string(all.size()) + " layers");
  }
  return all[static_cast<std::size_t>(index)];
}

}  // namespace mixprec
