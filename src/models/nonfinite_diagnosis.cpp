// The stuck-loss-scale diagnosis (DESIGN §2.5): on the batch that kept overflowing, find where the
// first Inf/NaN appears. Runs only once, when fit()/train_on_batch() is about to throw, so it
// favours clear answers over speed: the graph is replayed node by node (nested models are entered
// when their output is the culprit), and when every forward value is finite one backward pass
// takes the gradients of every layer output and variable at once.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/graph.h"
#include "mixprec/autograd.h"
#include "mixprec/ops.h"
#include "models/model_impl.h"
#include "models/training_state.h"
#include "ops/checks.h"

namespace mixprec::models {

namespace {

using layers::detail::GraphNode;

bool finite(const Tensor& t) { return !t.defined() || !is_floating(t.dtype()) || all_finite(t); }

bool finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (!finite(t)) return false;
  }
  return true;
}

using ops::describe;  // "float16 (32, 10)"

std::string describe_layer(const layers::Layer& l, const std::string& path) {
  return "layer '" + path + "' (" + l.class_name() + ", policy " + l.dtype_policy().name() + ")";
}

// A forward pass replayed node by node, keeping every value.
class Replay {
 public:
  Replay(ModelImpl& model, const std::vector<Tensor>& inputs) : model_(model) {
    const std::vector<KerasTensor>& ins = model.inputs();
    for (std::size_t i = 0; i < ins.size() && i < inputs.size(); ++i) {
      Tensor x = inputs[i];
      // As ModelImpl::forward: floating inputs take their Input's dtype.
      if (is_floating(x.dtype()) && is_floating(ins[i].dtype())) x = x.to(ins[i].dtype());
      inputs_[ins[i].data()->node.get()] = x;
    }
    const auto& nodes = model.nodes();
    for (std::size_t j = 0; j < nodes.size(); ++j) position_[nodes[j].get()] = j;
    outputs_.resize(nodes.size());
  }

  const Tensor& value(const KerasTensor& t) const {
    const GraphNode* n = t.data()->node.get();
    if (auto it = inputs_.find(n); it != inputs_.end()) return it->second;
    return outputs_[position_.at(n)][static_cast<std::size_t>(t.data()->index)];
  }
  std::vector<Tensor> arguments(std::size_t j) const {
    std::vector<Tensor> args;
    for (const KerasTensor& t : model_.nodes()[j]->inputs) args.push_back(value(t));
    return args;
  }
  // Runs node j; returns its outputs.
  const std::vector<Tensor>& run(std::size_t j, const CallOptions& options) {
    outputs_[j] = model_.nodes()[j]->layer.impl().call_eager(arguments(j), options);
    return outputs_[j];
  }
  const std::vector<Tensor>& outputs(std::size_t j) const { return outputs_[j]; }
  // Whether `t` is a model input (not produced by a node).
  bool is_input(const KerasTensor& t) const { return inputs_.count(t.data()->node.get()) > 0; }

 private:
  ModelImpl& model_;
  std::unordered_map<const GraphNode*, Tensor> inputs_;
  std::unordered_map<const GraphNode*, std::size_t> position_;
  std::vector<std::vector<Tensor>> outputs_;
};

// The first layer of `model` (entering nested models) whose output has Inf/NaN although its inputs
// are finite; empty when every output is finite. `replay` keeps the values for the backward check.
std::string first_non_finite_output(ModelImpl& model, Replay& replay, const std::string& prefix) {
  const CallOptions options{.training = true};  // as the training step ran it
  for (std::size_t j = 0; j < model.nodes().size(); ++j) {
    const std::vector<Tensor>& out = replay.run(j, options);
    if (finite(out)) continue;
    const layers::Layer& layer = model.nodes()[j]->layer;
    const std::string path = prefix + layer.name();
    if (auto* inner = dynamic_cast<ModelImpl*>(&layer.impl()); inner && inner->has_graph()) {
      Replay nested(*inner, replay.arguments(j));
      std::string found = first_non_finite_output(*inner, nested, path + "/");
      if (!found.empty()) return found;
    }
    std::string bad;
    for (const Tensor& t : out) {
      if (!finite(t)) bad += (bad.empty() ? "" : ", ") + describe(t);
    }
    std::string fix = "check its weights for huge values and lower the learning rate";
    if (layer.compute_dtype() == DType::float16) {
      fix =
          "float16 overflows beyond 65504: keep this layer in float32 ({.dtype = \"float32\"}), "
          "or " +
          fix;
    }
    return "the first non-finite value is the output of " + describe_layer(layer, path) + ": " +
           bad + " has Inf/NaN although its inputs are finite; " + fix;
  }
  return {};
}

// Every layer output is finite: one backward pass from the (scaled) loss with respect to every
// floating layer output and every trainable variable; the culprit is the last layer in execution
// order (the first the backward pass reaches) whose output gradient is finite but whose variable
// or input gradients are not.
std::string first_non_finite_gradient(const Model& model, TrainingState& state, Replay& replay,
                                      const Tensor& y) {
  ModelImpl& impl = model.model_impl();
  const auto& nodes = impl.nodes();
  const Tensor y_pred = replay.value(impl.outputs()[0]);
  const Tensor loss = batch_loss(state, y, y_pred);
  if (!finite(loss)) {
    return "every layer output is finite but the loss '" + state.loss.name() +
           "' is Inf/NaN on this batch (model output " + describe(y_pred) +
           "); check the targets and the loss";
  }
  const double scale = state.loss_scale ? state.loss_scale->loss_scale() : 1.0;

  // Sources: every floating node output that carries a graph, then the trainable variables.
  std::vector<Tensor> sources;
  std::vector<std::vector<int>> output_index(nodes.size());  // per node output, index or -1
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    for (const Tensor& t : replay.outputs(j)) {
      const bool differentiable = t.defined() && is_floating(t.dtype()) && t.requires_grad();
      output_index[j].push_back(differentiable ? static_cast<int>(sources.size()) : -1);
      if (differentiable) sources.push_back(t);
    }
  }
  const std::size_t first_variable = sources.size();
  std::vector<layers::NamedVariable> variables;
  std::unordered_map<const TensorImpl*, std::size_t> variable_index;
  for (layers::NamedVariable& v : model.named_variables()) {
    if (!v.trainable) continue;
    variable_index[v.value.impl()] = sources.size();
    sources.push_back(v.value);
    variables.push_back(std::move(v));
  }
  if (variables.empty()) return "the model has no trainable variables";
  const std::vector<Tensor> grads = grad(mul(loss, scale), sources);

  std::size_t bad_variables = 0;
  for (std::size_t k = first_variable; k < grads.size(); ++k)
    bad_variables += finite(grads[k]) ? 0 : 1;
  const std::string tally = std::to_string(bad_variables) + " of " +
                            std::to_string(variables.size()) +
                            " trainable variables have non-finite gradients";

  auto output_grad_finite = [&](std::size_t j, int index) {
    const int k = output_index[j][static_cast<std::size_t>(index)];
    return k < 0 || finite(grads[static_cast<std::size_t>(k)]);
  };
  std::unordered_map<const GraphNode*, std::size_t> position;
  for (std::size_t j = 0; j < nodes.size(); ++j) position[nodes[j].get()] = j;

  for (std::size_t r = nodes.size(); r-- > 0;) {
    bool outputs_ok = true;
    for (std::size_t o = 0; o < output_index[r].size(); ++o) {
      outputs_ok = outputs_ok && output_grad_finite(r, static_cast<int>(o));
    }
    if (!outputs_ok) continue;
    const layers::Layer& layer = nodes[r]->layer;
    std::string culprit;
    for (const layers::NamedVariable& v : layer.named_variables()) {
      auto it = variable_index.find(v.value.impl());
      if (it != variable_index.end() && !finite(grads[it->second])) {
        culprit = "the gradient of its variable '" + v.name + "'";
        break;
      }
    }
    if (culprit.empty()) {
      for (const KerasTensor& in : nodes[r]->inputs) {
        if (replay.is_input(in)) continue;
        if (!output_grad_finite(position.at(in.data()->node.get()), in.data()->index)) {
          culprit = "the gradient of its input '" + in.name() + "'";
          break;
        }
      }
    }
    if (culprit.empty()) continue;
    std::string fix = "check its weights and lower the learning rate";
    if (layer.compute_dtype() == DType::float16) {
      fix =
          "float16 overflows beyond 65504: keep this layer in float32 ({.dtype = \"float32\"}), "
          "or " +
          fix;
    }
    return "every layer output is finite; the backward pass first turns non-finite at " +
           describe_layer(layer, layer.name()) + ": " + culprit +
           " has Inf/NaN while the gradient of its output is finite (" + tally + "); " + fix;
  }
  // The model output's own gradient (from the loss) is non-finite.
  for (std::size_t o = 0; !nodes.empty() && o < output_index.back().size(); ++o) {
    if (!output_grad_finite(nodes.size() - 1, static_cast<int>(o))) {
      return "every layer output is finite but the gradient of the loss '" + state.loss.name() +
             "' with respect to the model output is Inf/NaN (" + tally + "); check the loss";
    }
  }
  for (std::size_t k = first_variable; k < grads.size(); ++k) {
    if (!finite(grads[k])) {
      return "every layer output is finite; the gradient of variable '" +
             variables[k - first_variable].name + "' is Inf/NaN (" + tally + ")";
    }
  }
  return "a diagnostic pass on this batch found only finite values and gradients (the overflow "
         "may depend on dropout or on the state before the skipped steps)";
}

}  // namespace

std::string diagnose_non_finite(const Model& model, TrainingState& state, const Tensor& x,
                                const Tensor& y) {
  if (!finite(x)) {
    return "the input batch x (" + describe(x) + ") contains Inf/NaN; clean the data first";
  }
  ModelImpl& impl = model.model_impl();
  if (!impl.has_graph() || impl.outputs().size() != 1) {
    return "the model graph is not available for a diagnosis";
  }
  Replay replay(impl, {x});
  std::string found = first_non_finite_output(impl, replay, "");
  if (!found.empty()) return found;
  return first_non_finite_gradient(model, state, replay, y);
}

}  // namespace mixprec::models
