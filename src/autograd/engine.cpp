// The backward engine: a topological walk of the recorded graph from one output. Each node runs
// once, after every gradient flowing into it has been summed.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec {

namespace {

using autograd::Node;

// Nodes reachable from `root`, in an order where every node comes before the nodes it feeds.
std::vector<Node*> topological_order(Node* root) {
  std::unordered_map<Node*, int> dependencies;  // how many reachable nodes feed each node
  std::vector<Node*> stack{root};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next) {
      if (!next) continue;
      ++dependencies[next.get()];
      if (seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }
  std::vector<Node*> order;
  std::vector<Node*> ready{root};
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    order.push_back(node);
    for (const auto& next : node->next) {
      if (next && --dependencies[next.get()] == 0) ready.push_back(next.get());
    }
  }
  return order;
}

Tensor initial_gradient(const Tensor& output, const Tensor& output_gradient, const char* who) {
  if (!output.requires_grad()) {
    throw AutogradError(
        std::string(who) +
        ": the tensor does not require a gradient (no input of the ops that made it "
        "requires_grad, or it was computed inside a NoGradScope)");
  }
  if (!output_gradient.defined()) {
    if (output.numel() != 1) {
      throw AutogradError(std::string(who) + ": output of shape " + output.shape().to_string() +
                          " is not a scalar; pass a gradient of the same shape");
    }
    return ones(output.shape(), {.dtype = output.dtype(), .device = output.device()});
  }
  if (output_gradient.shape() != output.shape() || output_gradient.dtype() != output.dtype()) {
    throw AutogradError(std::string(who) + ": gradient " + output_gradient.shape().to_string() +
                        " " + std::string(dtype_name(output_gradient.dtype())) +
                        " does not match output " + output.shape().to_string() + " " +
                        std::string(dtype_name(output.dtype())));
  }
  return output_gradient;
}

// Runs the backward pass. With `captures` empty, leaf gradients are accumulated into .grad();
// otherwise the total gradient arriving at each captured node is stored in `captured` instead and
// no .grad() is touched.
void run_backward(const Tensor& output, const Tensor& output_gradient, RetainGraph retain,
                  const std::unordered_set<Node*>& captures,
                  std::unordered_map<Node*, Tensor>& captured, const char* who) {
  Tensor seed = initial_gradient(output, output_gradient, who);
  NoGradScope no_grad;
  std::shared_ptr<Node> root = autograd::edge_to(output);
  std::unordered_map<Node*, Tensor> pending{{root.get(), seed}};
  for (Node* node : topological_order(root.get())) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // no gradient reached it (all contributions undefined)
    Tensor grad = std::move(it->second);
    pending.erase(it);
    if (grad.shape() != node->output_shape || grad.dtype() != node->output_dtype) {
      throw AutogradError("internal: " + node->name() + " received a gradient " +
                          grad.shape().to_string() + " " + std::string(dtype_name(grad.dtype())) +
                          " for an output " + node->output_shape.to_string() + " " +
                          std::string(dtype_name(node->output_dtype)));
    }
    const bool capturing = !captures.empty();
    if (capturing && captures.count(node)) captured[node] = grad;
    if (capturing && dynamic_cast<autograd::AccumulateGrad*>(node)) continue;
    if (node->released) {
      throw AutogradError(
          std::string(who) + ": " + node->name() +
          " was already used by a backward pass that freed the graph; pass "
          "retain_graph = true (RetainGraph::yes, or a persistent GradientTape) the "
          "first time to differentiate it again");
    }
    std::vector<Tensor> input_grads = node->backward(grad);
    // Leaf accumulators serve every graph their variable takes part in: never released.
    if (retain == RetainGraph::no && !dynamic_cast<autograd::AccumulateGrad*>(node)) {
      node->release_saved();
      node->released = true;
    }
    for (std::size_t i = 0; i < node->next.size() && i < input_grads.size(); ++i) {
      Node* next = node->next[i].get();
      if (!next || !input_grads[i].defined()) continue;
      auto [slot, inserted] = pending.try_emplace(next, input_grads[i]);
      if (!inserted) slot->second = add(slot->second, input_grads[i]);
    }
  }
}

}  // namespace

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  std::unordered_map<Node*, Tensor> unused;
  run_backward(*this, gradient, retain_graph ? RetainGraph::yes : RetainGraph::no, {}, unused,
               "backward");
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& output_gradient, RetainGraph retain) {
  std::unordered_set<Node*> captures;
  std::vector<std::shared_ptr<Node>> input_nodes;
  for (const Tensor& input : inputs) {
    if (!input.defined()) throw AutogradError("grad: an input tensor is undefined");
    input_nodes.push_back(autograd::edge_to(input));
    if (input_nodes.back()) captures.insert(input_nodes.back().get());
  }
  std::unordered_map<Node*, Tensor> captured;
  if (!captures.empty()) {
    run_backward(output, output_gradient, retain, captures, captured, "grad");
  } else {
    initial_gradient(output, output_gradient, "grad");  // still validate the output
  }
  std::vector<Tensor> result;
  result.reserve(inputs.size());
  // Storage already handed out: one gradient tensor can reach several inputs (add's backward
  // passes it to both operands) or be the caller's own output_gradient; copy it then.
  std::unordered_set<const core::Storage*> used;
  if (output_gradient.defined()) used.insert(output_gradient.impl()->storage.get());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto it = input_nodes[i] ? captured.find(input_nodes[i].get()) : captured.end();
    Tensor g = it != captured.end() ? it->second : zeros_like(inputs[i]);
    if (!used.insert(g.impl()->storage.get()).second) g = autograd::fresh_copy(g);
    result.push_back(g);
  }
  return result;
}

}  // namespace mixprec
