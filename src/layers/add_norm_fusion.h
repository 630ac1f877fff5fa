// The layer side of the Add + LayerNormalization / RMSNormalization fusion that the functional
// model runs (src/models/model.cpp, ModelImpl::forward): which normalization layers qualify, the
// parameters they hand to the fused op (ops/add_layer_norm.h), and a scope through which the model
// asks the next Add call on this thread to return the sum and leave the normalization's output
// behind for the normalization's node.
#pragma once

#include <optional>
#include <utility>

#include "mixprec/layers/layer.h"
#include "mixprec/tensor.h"

namespace mixprec::layers::detail {

// What a normalization layer's call would pass to layer_norm / rms_norm.
struct FusedNormParameters {
  bool rms = false;  // rms_norm (beta undefined) instead of layer_norm
  Tensor gamma, beta;
  double epsilon = 0;
};

// Whether `layer` is a built LayerNormalization or RMSNormalization that computes in
// `input_dtype` (no cast of its input): the only kind of consumer the fusion replaces.
bool fusable_norm_layer(const Layer& layer, DType input_dtype);

// For such a layer and its input x (as its call would get it): the parameters, read now as its
// call reads them (recorded by autograd likewise); nullopt where the call would not take x as it
// is (another dtype, a last axis of another size, rank < 2), so the unfused call reports it.
std::optional<FusedNormParameters> fused_norm_parameters(const Layer& layer, const Tensor& x);
// The two halves of the above, one per layer class (layer_normalization.cpp,
// rms_normalization.cpp): nullopt for a layer of any other class.
std::optional<FusedNormParameters> layer_norm_parameters(const Layer& layer, const Tensor& x);
std::optional<FusedNormParameters> rms_norm_parameters(const Layer& layer, const Tensor& x);
bool is_layer_normalization(const Layer& layer);
bool is_rms_normalization(const Layer& layer);

// While alive, the first Add call on this thread with two inputs of one shape and dtype computes
// its sum through the fused op with `norm`'s normalization, returns the sum and keeps the
// normalization's output here (y(); undefined when no Add took the request). One at a time per
// thread.
class AddNormScope {
 public:
  explicit AddNormScope(const Layer& norm);
  ~AddNormScope();
  AddNormScope(const AddNormScope&) = delete;
  AddNormScope& operator=(const AddNormScope&) = delete;

  const Layer& norm() const { return norm_; }
  const Tensor& y() const { return y_; }
  void set_y(Tensor y) { y_ = std::move(y); }

 private:
  const Layer& norm_;
  Tensor y_;
};

// The pending AddNormScope of this thread, cleared (null: none).
AddNormScope* take_add_norm_request();

}  // namespace mixprec::layers::detail
