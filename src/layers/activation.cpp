// Activation (by name) and Softmax (any axis): elementwise or per-row, no variables.
#include "mixprec/layers/activation.h"

#include <string>

#include "layers/activation_fusion.h"
#include "layers/layer_config.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/batch_norm_activation.h"

namespace mixprec::layers {

namespace {

class ActivationImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["activation"] = activation_;
    return c;
  }
  ActivationImpl(std::string activation, const ActivationOptions& o)
      : LayerImpl("Activation", {o.dtype, o.name, o.trainable}),
        activation_(std::move(activation)) {
    check_activation_name(activation_, name());
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return shapes;
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    return {apply_activation(activation_, inputs[0])};
  }

  bool casts(DType input_dtype) const { return autocast_dtype(input_dtype) != input_dtype; }

  std::string activation_;
};

class SoftmaxImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["axis"] = axis_;
    return c;
  }
  SoftmaxImpl(int axis, const LayerOptions& o) : LayerImpl("Softmax", o), axis_(axis) {}

  void validate(const std::vector<PartialShape>& shapes) const override {
    const int rank = static_cast<int>(shapes[0].size());
    if (axis_ >= rank || axis_ < -rank) {
      throw ShapeError(name() + ": Softmax over axis " + std::to_string(axis_) +
                       " needs an input of rank > " +
                       std::to_string(axis_ < 0 ? -axis_ - 1 : axis_) + ", got shape " +
                       partial_shape_to_string(shapes[0]));
    }
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return shapes;
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    // Stable (max subtracted) and accumulated in float32 inside, output in the compute dtype.
    return {softmax(inputs[0], axis_)};
  }

  int axis_;
};

}  // namespace

std::optional<UnaryOp> detail::fusable_activation_layer(const Layer& layer, DType input_dtype) {
  const auto* a = dynamic_cast<const ActivationImpl*>(layer.impl_ptr().get());
  if (a == nullptr || a->casts(input_dtype)) return std::nullopt;
  return ops::fusable_activation(a->activation_);
}

Activation::Activation(std::string activation, ActivationOptions options)
    : Layer(std::make_shared<ActivationImpl>(std::move(activation), options)) {}

const std::string& Activation::activation() const {
  return static_cast<const ActivationImpl&>(impl()).activation_;
}

Softmax::Softmax(int axis, LayerOptions options)
    : Layer(std::make_shared<SoftmaxImpl>(axis, options)) {}

int Softmax::axis() const { return static_cast<const SoftmaxImpl&>(impl()).axis_; }

}  // namespace mixprec::layers
