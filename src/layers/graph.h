// The symbolic graph of the functional API. Each layer call on KerasTensors records a GraphNode:
// the layer (held strongly, so `Dense(10)(x)` temporaries live on inside the graph), its input
// KerasTensors and the specs of its outputs. A KerasTensor points at the node that produced it, so
// the graph is owned from the outputs backwards; layers never point at their nodes (no cycles).
#pragma once

#include <memory>
#include <vector>

#include "mixprec/layers/keras_tensor.h"
#include "mixprec/layers/layer.h"

namespace mixprec::layers::detail {

struct GraphNode {
  Layer layer;
  std::vector<KerasTensor> inputs;  // empty for an InputLayer's node
  std::vector<TensorSpec> outputs;
};

// Records a call of `layer` on `inputs` with the given output specs; returns the outputs.
std::vector<KerasTensor> record_call(const Layer& layer, std::vector<KerasTensor> inputs,
                                     const std::vector<TensorSpec>& outputs);

}  // namespace mixprec::layers::detail
