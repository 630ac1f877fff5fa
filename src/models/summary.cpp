// Model::summary(): a Keras-style table of the layers, their output shapes, parameter counts and
// dtype policies, then the parameter totals.
#include <algorithm>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/input_layer_impl.h"
#include "mixprec/models/model.h"
#include "mixprec/models/tensor_core_advice.h"
#include "models/model_impl.h"
#include "models/training_state.h"

namespace mixprec {

namespace {

using layers::detail::GraphNode;

// 3215360 -> "3,215,360" (the totals; per-layer counts print plainly, as Keras does).
std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string specs_string(const std::vector<TensorSpec>& specs) {
  if (specs.size() == 1) return partial_shape_to_string(specs[0].shape);
  std::string s = "[";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    s += (i ? ", " : "") + partial_shape_to_string(specs[i].shape);
  }
  return s + "]";
}

struct Row {
  std::string layer, shape, params, policy, connected;
};

}  // namespace

void Model::summary(std::ostream& os) const {
  const models::ModelImpl& m = model_impl();
  m.require_graph("summary()");

  // Each layer's calls in this model's graph (a shared layer has several).
  std::unordered_map<const layers::LayerImpl*, std::vector<const GraphNode*>> calls;
  for (const auto& n : m.nodes()) calls[n->layer.impl_ptr().get()].push_back(n.get());
  for (const KerasTensor& t : m.inputs()) {
    calls[t.layer().impl_ptr().get()].push_back(t.data()->node.get());
  }

  // "Connected to" only when the graph is not a plain chain.
  bool chain = m.inputs().size() == 1 && m.outputs().size() == 1;
  for (std::size_t j = 0; chain && j < m.nodes().size(); ++j) {
    const GraphNode& n = *m.nodes()[j];
    const GraphNode* previous = j == 0 ? m.inputs()[0].data()->node.get() : m.nodes()[j - 1].get();
    chain = n.inputs.size() == 1 && n.inputs[0].data()->node.get() == previous;
  }

  // A tensor as "layer", "layer[k]" for the k-th call of a layer called several times in this
  // model, and ":i" for output i of a call with several outputs.
  auto tensor_label = [&](const KerasTensor& t) {
    const GraphNode* producer = t.data()->node.get();
    std::string label = producer->layer.name();
    const auto& producer_calls = calls[producer->layer.impl_ptr().get()];
    if (producer_calls.size() > 1) {
      const auto it = std::find(producer_calls.begin(), producer_calls.end(), producer);
      label += "[" + std::to_string(it - producer_calls.begin()) + "]";
    }
    if (producer->outputs.size() > 1) label += ":" + std::to_string(t.data()->index);
    return label;
  };

  std::vector<Row> rows;
  for (const layers::Layer& l : layers()) {
    Row r;
    r.layer = l.name() + " (" + l.class_name() + ")";
    const auto& nodes = calls[l.impl_ptr().get()];
    std::string shape;
    for (const GraphNode* n : nodes) {
      const std::string s = specs_string(n->outputs);
      if (shape.empty()) {
        shape = s;
      } else if (shape != s) {
        shape = "multiple";
      }
    }
    r.shape = shape.empty() ? "?" : shape;
    r.params = std::to_string(l.count_params());
    const auto* input = dynamic_cast<const layers::InputLayerImpl*>(l.impl_ptr().get());
    r.policy = input ? std::string(dtype_name(input->dtype_)) : l.dtype_policy().name();
    if (!chain) {
      for (const GraphNode* n : nodes) {
        for (const KerasTensor& t : n->inputs) {
          r.connected += (r.connected.empty() ? "" : ", ") + tensor_label(t);
        }
      }
    }
    rows.push_back(std::move(r));
  }

  Row header{"Layer (type)", "Output Shape", "Param #", "Policy", chain ? "" : "Connected to"};
  std::size_t w_layer = header.layer.size(), w_shape = header.shape.size(),
              w_params = header.params.size(), w_policy = header.policy.size(),
              w_connected = header.connected.size();
  for (const Row& r : rows) {
    w_layer = std::max(w_layer, r.layer.size());
    w_shape = std::max(w_shape, r.shape.size());
    w_params = std::max(w_params, r.params.size());
    w_policy = std::max(w_policy, r.policy.size());
    w_connected = std::max(w_connected, r.connected.size());
  }
  constexpr std::size_t kGap = 3;
  auto pad = [](const std::string& s, std::size_t width) {
    return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
  };
  const std::size_t total_width = 1 + w_layer + kGap + w_shape + kGap + w_params + kGap + w_policy +
                                  (chain ? 0 : kGap + w_connected);
  auto line = [&](const Row& r) {
    std::string s(1, ' ');
    s += pad(r.layer, w_layer + kGap);
    s += pad(r.shape, w_shape + kGap);
    s += pad(r.params, w_params + kGap);
    s += chain ? r.policy : pad(r.policy, w_policy + kGap) + r.connected;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    os << s << '\n';
  };

  std::int64_t trainable = 0, non_trainable = 0;
  for (const layers::NamedVariable& v : m.named_variables()) {
    (v.trainable ? trainable : non_trainable) += v.value.numel();
  }

  os << "Model: \"" << name() << "\"\n";
  os << std::string(total_width, '_') << '\n';
  line(header);
  os << std::string(total_width, '=') << '\n';
  for (const Row& r : rows) line(r);
  os << std::string(total_width, '=') << '\n';
  os << "Total params: " << with_commas(trainable + non_trainable) << '\n';
  os << "Trainable params: " << with_commas(trainable) << '\n';
  os << "Non-trainable params: " << with_commas(non_trainable) << '\n';
  // On a GPU, the seed's tensor-core rule for every 16-bit layer that breaks it.
  if (models::model_device(*this).is_cuda()) {
    const std::vector<TensorCoreAdvice> advice = tensor_core_advice(*this);
    if (!advice.empty()) {
      os << "Tensor cores (float16/bfloat16 run at full speed on multiples of 8):\n";
      for (const TensorCoreAdvice& a : advice) os << "  " << a.to_string() << '\n';
    }
  }
  os << std::string(total_width, '_') << '\n';
}

}  // namespace mixprec
