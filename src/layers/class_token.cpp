// ClassToken: x (batch, N, C) -> concat([token] * batch, x) along axis 1, (batch, N + 1, C).
#include "mixprec/layers/class_token.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::layers {

namespace {

class ClassTokenImpl final : public LayerImpl {
 public:
  explicit ClassTokenImpl(const ClassTokenOptions& o)
      : LayerImpl("ClassToken", {o.dtype, o.name, o.trainable}), o_(o) {}

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["initializer"] = detail::initializer_config(o_.initializer, name(), "initializer");
    return c;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (s.size() != 3 || s.back() < 0) {
      throw ShapeError(name() +
                       ": ClassToken expects an input (batch, tokens, features) with a known "
                       "feature axis, got shape " +
                       partial_shape_to_string(s));
    }
    if (token_.defined() && s.back() != token_.dim(0)) {
      throw ShapeError(name() + ": expected an input with " + std::to_string(token_.dim(0)) +
                       " features (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same feature size "
                       "or use a new layer");
    }
  }

  void build(const std::vector<PartialShape>& shapes) override {
    token_ = add_weight("token", Shape{shapes[0].back()}, o_.initializer);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    PartialShape s = shapes[0];
    if (s[1] >= 0) s[1] += 1;
    return {s};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    return {TensorSpec{compute_output_shape({inputs[0].shape})[0], compute_dtype()}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];
    const std::int64_t c = x.dim(2);
    // One row per sample, a broadcast view of the token: concat copies it, and the backward of
    // the broadcast sums the batch's row-0 gradients into the token.
    const Tensor row = broadcast_to(read(token_).reshape(Shape{1, 1, c}), Shape{x.dim(0), 1, c});
    return {concat({row, x.to(compute_dtype())}, 1)};
  }

  ClassTokenOptions o_;
  Tensor token_;
};

const ClassTokenImpl& class_token_impl(const Layer& layer) {
  return static_cast<const ClassTokenImpl&>(layer.impl());
}

}  // namespace

ClassToken::ClassToken(ClassTokenOptions options)
    : Layer(std::make_shared<ClassTokenImpl>(options)) {}

ClassToken::ClassToken(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<ClassTokenImpl*>(&impl()) == nullptr) {
    throw ValueError("ClassToken: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a ClassToken");
  }
}

Tensor ClassToken::token() const {
  const ClassTokenImpl& p = class_token_impl(*this);
  if (!p.built()) {
    throw ValueError(p.name() +
                     ": token does not exist until the layer is built; call the layer on an input "
                     "(or on mp::Input) first");
  }
  return p.token_;
}

}  // namespace mixprec::layers
