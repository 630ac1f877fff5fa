// The layer side of the BatchNormalization + Activation fusion that the functional model runs
// (src/models/model.cpp, ModelImpl::forward): which layers qualify, and a scope that makes the next
// BatchNormalization call on this thread apply the activation through the fused op.
#pragma once

#include <optional>

#include "core/op_kinds.h"
#include "mixprec/layers/layer.h"

namespace mixprec::layers::detail {

// For a BatchNormalization layer (not synchronized across processes): the dtype of its output for
// an input of `input_dtype`; nullopt for any other layer.
std::optional<DType> fusable_batch_norm_output(const Layer& layer, DType input_dtype);

// For an Activation layer whose activation the fused op applies (relu, relu6, sigmoid, swish /
// silu) and that computes in `input_dtype` (no cast of its input): that activation; else nullopt.
std::optional<UnaryOp> fusable_activation_layer(const Layer& layer, DType input_dtype);

// While alive, the first BatchNormalization call on this thread returns act(bn(x)) through
// ops::batch_norm_activation_* (and consumes the request). One at a time per thread.
class FusedActivationScope {
 public:
  explicit FusedActivationScope(UnaryOp act);
  ~FusedActivationScope();
  FusedActivationScope(const FusedActivationScope&) = delete;
  FusedActivationScope& operator=(const FusedActivationScope&) = delete;
};

}  // namespace mixprec::layers::detail
