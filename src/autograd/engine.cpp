// The backward engine: a topological walk of the recorded graph from one output. Each node runs
// once, after every gradient flowing into it has been summed.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/gradient_ready.h"
#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
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

// acc + g, written into acc where the device can and acc's storage has no other owner (no other
// handle, no view, not saved by a node, not the other operand): the gradient a fan-out sums. The
// gradient an add passes to both of its inputs is one tensor with two handles, so it is never
// written in place while the other branch can still read it.
// Whether `t` repeats values along some axis (stride 0 with extent > 1): a gradient that a
// reduction's backward passes as a broadcast view of its small gradient.
bool broadcast_view(const Tensor& t) {
  for (int i = 0; i < t.rank(); ++i) {
    if (t.dim(i) > 1 && t.strides()[static_cast<std::size_t>(i)] == 0) return true;
  }
  return false;
}

// A gradient as a node or a caller receives it: dense where it is a broadcast view.
Tensor dense(Tensor g) { return broadcast_view(g) ? g.contiguous() : std::move(g); }

Tensor accumulate(Tensor acc, const Tensor& g) {
  const auto accumulate_gradient = backend_for(acc.device()).nn->accumulate_gradient;
  if (accumulate_gradient != nullptr && autograd::sole_handle(acc) &&
      (g.is_contiguous() || broadcast_view(g)) && acc.shape() == g.shape() &&
      acc.dtype() == g.dtype() && acc.device() == g.device() &&
      acc.impl()->storage != g.impl()->storage) {
    accumulate_gradient(acc, g);
    return acc;
  }
  return add(acc, g);
}

// Receives the final gradient of a captured node as soon as it is known (grad_reporting_ready).
// A leaf accumulator's gradient is moved in (the engine holds no other handle); an inner node's is
// a second handle, since the pass goes on through that node.
using CaptureSink = std::function<void(Node* node, Tensor gradient)>;

// Runs the backward pass. With `captures` empty, leaf gradients are accumulated into .grad();
// otherwise the total gradient arriving at each captured node is stored in `captured` (or handed
// to `sink` when there is one) instead and no .grad() is touched.
void run_backward(const Tensor& output, const Tensor& output_gradient, RetainGraph retain,
                  const std::unordered_set<Node*>& captures,
                  std::unordered_map<Node*, Tensor>& captured, const char* who,
                  const CaptureSink* sink = nullptr) {
  Tensor seed = initial_gradient(output, output_gradient, who);
  NoGradScope no_grad;
  std::shared_ptr<Node> root = autograd::edge_to(output);
  std::unordered_map<Node*, Tensor> pending{{root.get(), seed}};
  for (Node* node : topological_order(root.get())) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // no gradient reached it (all contributions undefined)
    Tensor grad = dense(std::move(it->second));
    pending.erase(it);
    if (grad.shape() != node->output_shape || grad.dtype() != node->output_dtype) {
      throw AutogradError("internal: " + node->name() + " received a gradient " +
                          grad.shape().to_string() + " " + std::string(dtype_name(grad.dtype())) +
                          " for an output " + node->output_shape.to_string() + " " +
                          std::string(dtype_name(node->output_dtype)));
    }
    const bool capturing = !captures.empty();
    const bool leaf = capturing && dynamic_cast<autograd::AccumulateGrad*>(node) != nullptr;
    if (capturing && captures.count(node)) {
      if (sink == nullptr) {
        captured[node] = grad;
      } else {
        (*sink)(node, leaf ? std::move(grad) : grad);
      }
    }
    if (leaf) continue;
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
      if (!inserted) slot->second = accumulate(std::move(slot->second), input_grads[i]);
    }
  }
}

// The nodes whose gradients grad() returns: one per input (null for an input that needs none).
std::vector<std::shared_ptr<Node>> input_nodes_of(const std::vector<Tensor>& inputs,
                                                  std::unordered_set<Node*>& captures) {
  std::vector<std::shared_ptr<Node>> input_nodes;
  input_nodes.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    if (!input.defined()) throw AutogradError("grad: an input tensor is undefined");
    input_nodes.push_back(autograd::edge_to(input));
    if (input_nodes.back()) captures.insert(input_nodes.back().get());
  }
  return input_nodes;
}

// grad() with its hook: every gradient is handed out as soon as it is final, owned by nothing else
// (a copy when the engine or another input still shares it), then reported.
std::vector<Tensor> grad_with_hook(const Tensor& output, const std::vector<Tensor>& inputs,
                                   const autograd::GradientReadyHook& on_ready,
                                   const Tensor& output_gradient, RetainGraph retain) {
  std::unordered_set<Node*> captures;
  const std::vector<std::shared_ptr<Node>> input_nodes = input_nodes_of(inputs, captures);
  std::unordered_map<Node*, std::vector<std::size_t>> indices_of;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (input_nodes[i]) indices_of[input_nodes[i].get()].push_back(i);
  }
  std::vector<Tensor> result(inputs.size());
  const auto hand_out = [&](std::size_t i, Tensor g) {
    result[i] = autograd::sole_handle(g) ? std::move(g) : autograd::fresh_copy(g);
    on_ready(i, result[i]);
  };
  const CaptureSink sink = [&](Node* node, Tensor g) {
    const std::vector<std::size_t>& indices = indices_of.at(node);
    // All but the last index get a copy (the handle passed on is a second one).
    for (std::size_t k = 0; k + 1 < indices.size(); ++k) hand_out(indices[k], g);
    hand_out(indices.back(), std::move(g));
  };
  std::unordered_map<Node*, Tensor> unused;
  if (!captures.empty()) {
    run_backward(output, output_gradient, retain, captures, unused, "grad", &sink);
  } else {
    initial_gradient(output, output_gradient, "grad");  // still validate the output
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!result[i].defined()) hand_out(i, zeros_like(inputs[i]));
  }
  return result;
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
  const std::vector<std::shared_ptr<Node>> input_nodes = input_nodes_of(inputs, captures);
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

namespace autograd {

std::vector<Tensor> grad_reporting_ready(const Tensor& output, const std::vector<Tensor>& inputs,
                                         const GradientReadyHook& on_ready,
                                         const Tensor& output_gradient, RetainGraph retain) {
  if (!on_ready) return grad(output, inputs, output_gradient, retain);
  return grad_with_hook(output, inputs, on_ready, output_gradient, retain);
}

}  // namespace autograd

}  // namespace mixprec
