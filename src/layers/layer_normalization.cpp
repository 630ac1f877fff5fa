// LayerNormalization: x (..., C) in the compute dtype; gamma, beta (C,) float32 (float64 under a
// float64 policy) whatever the policy; y from mixprec::layer_norm in the compute dtype.
#include "mixprec/layers/layer_normalization.h"

#include <string>

#include "layers/add_norm_fusion.h"
#include "layers/layer_config.h"
#include "layers/norm_layer_checks.h"
#include "mixprec/error.h"
#include "mixprec/transformer_ops.h"

namespace mixprec::layers {

namespace {

class LayerNormalizationImpl final : public LayerImpl {
 public:
  explicit LayerNormalizationImpl(const LayerNormalizationOptions& o)
      : LayerImpl("LayerNormalization", {o.dtype, o.name, o.trainable}), o_(o) {
    detail::check_norm_epsilon(name(), "LayerNormalization", o.epsilon);
  }

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["axis"] = o_.axis;
    c["epsilon"] = o_.epsilon;
    c["center"] = o_.center;
    c["scale"] = o_.scale;
    c["beta_initializer"] =
        detail::initializer_config(o_.beta_initializer, name(), "beta_initializer");
    c["gamma_initializer"] =
        detail::initializer_config(o_.gamma_initializer, name(), "gamma_initializer");
    return c;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    detail::check_norm_input(name(), "LayerNormalization", o_.axis, shapes[0],
                             built() ? features_ : -1);
  }

  void build(const std::vector<PartialShape>& shapes) override {
    features_ = shapes[0].back();
    const Shape c{features_};
    const DType param = detail::norm_param_dtype(variable_dtype());
    if (o_.scale) gamma_ = add_weight("gamma", c, o_.gamma_initializer, Trainable::yes, param);
    if (o_.center) beta_ = add_weight("beta", c, o_.beta_initializer, Trainable::yes, param);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {shapes[0]};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    detail::check_norm_floating(name(), "LayerNormalization", inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (..., C) in the compute dtype
    detail::check_norm_floating(name(), "LayerNormalization", x.dtype());
    const detail::FusedNormParameters p = parameters(x);
    return {layer_norm(x, p.gamma, p.beta, p.epsilon)};
  }

  // What call() passes to layer_norm for x (the Add fusion takes the same).
  detail::FusedNormParameters parameters(const Tensor& x) const {
    // The float32 island: the parameters go to the op in float32 (float64 for float64 x).
    const DType param = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
    detail::FusedNormParameters p;
    p.gamma = o_.scale ? gamma_.to(param) : Tensor();
    p.beta = o_.center ? beta_.to(param) : Tensor();
    p.epsilon = o_.epsilon;
    return p;
  }

  // Whether call_eager would pass x to call() as it is: built, x in the compute dtype, the shape
  // validate() accepts.
  bool takes_as_is(const Tensor& x) const {
    const int rank = x.rank();
    return built() && is_floating(x.dtype()) && autocast_dtype(x.dtype()) == x.dtype() &&
           rank >= 2 && (o_.axis == -1 || o_.axis == rank - 1) && x.dim(-1) == features_;
  }

  LayerNormalizationOptions o_;
  std::int64_t features_ = -1;
  Tensor gamma_, beta_;
};

const LayerNormalizationImpl& ln_impl(const Layer& layer) {
  return static_cast<const LayerNormalizationImpl&>(layer.impl());
}

Tensor built_variable(const LayerNormalizationImpl& l, const Tensor& v, const char* what) {
  if (!l.built()) {
    throw ValueError(l.name() + ": " + what +
                     " does not exist until the layer is built; call the layer on an input (or on "
                     "mp::Input) first");
  }
  return v;
}

}  // namespace

bool detail::is_layer_normalization(const Layer& layer) {
  return dynamic_cast<const LayerNormalizationImpl*>(layer.impl_ptr().get()) != nullptr;
}

std::optional<detail::FusedNormParameters> detail::layer_norm_parameters(const Layer& layer,
                                                                         const Tensor& x) {
  const auto* ln = dynamic_cast<const LayerNormalizationImpl*>(layer.impl_ptr().get());
  if (ln == nullptr || !ln->takes_as_is(x)) return std::nullopt;
  return ln->parameters(x);
}

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer(std::make_shared<LayerNormalizationImpl>(options)) {}

LayerNormalization::LayerNormalization(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<LayerNormalizationImpl*>(&impl()) == nullptr) {
    throw ValueError("LayerNormalization: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a LayerNormalization");
  }
}

int LayerNormalization::axis() const { return ln_impl(*this).o_.axis; }
double LayerNormalization::epsilon() const { return ln_impl(*this).o_.epsilon; }
bool LayerNormalization::center() const { return ln_impl(*this).o_.center; }
bool LayerNormalization::scale() const { return ln_impl(*this).o_.scale; }
Tensor LayerNormalization::gamma() const {
  return built_variable(ln_impl(*this), ln_impl(*this).gamma_, "gamma");
}
Tensor LayerNormalization::beta() const {
  return built_variable(ln_impl(*this), ln_impl(*this).beta_, "beta");
}

}  // namespace mixprec::layers
