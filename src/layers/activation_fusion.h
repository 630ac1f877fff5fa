// The layer side of the activation fusions that the functional model runs (src/models/model.cpp,
// ModelImpl::forward): BatchNormalization + Activation (relu, relu6, sigmoid, swish) and Add +
// ReLU. Which layers qualify, and a scope that makes the next BatchNormalization or Add call on
// this thread apply the activation through the fused op.
#pragma once

#include <optional>

#include "core/op_kinds.h"
#include "mixprec/layers/layer.h"

namespace mixprec::layers::detail {

// For a BatchNormalization layer (not synchronized across processes): the dtype of its output for
// an input of `input_dtype`; nullopt for any other layer.
std::optional<DType> fusable_batch_norm_output(const Layer& layer, DType input_dtype);

// For an Add layer: the dtype of its output for inputs of `input_dtype`; nullopt for any other
// layer. Only relu is fused after an Add (ops::add_relu).
std::optional<DType> fusable_add_output(const Layer& layer, DType input_dtype);

// For an Activation layer whose activation the fused op applies (relu, relu6, sigmoid, swish /
// silu) and that computes in `input_dtype` (no cast of its input): that activation; else nullopt.
std::optional<UnaryOp> fusable_activation_layer(const Layer& layer, DType input_dtype);

// While alive, the first BatchNormalization or Add call on this thread applies the activation
// through the fused op (and consumes the request). One at a time per thread.
class FusedActivationScope {
 public:
  explicit FusedActivationScope(UnaryOp act);
  ~FusedActivationScope();
  FusedActivationScope(const FusedActivationScope&) = delete;
  FusedActivationScope& operator=(const FusedActivationScope&) = delete;
};

// The pending request of a FusedActivationScope on this thread, cleared (nullopt: none).
std::optional<UnaryOp> take_fused_activation();

}  // namespace mixprec::layers::detail
