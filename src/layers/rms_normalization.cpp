// RMSNormalization: x (..., C) in the compute dtype; scale (C,) float32 (float64 under a float64
// policy) whatever the policy; y from mixprec::rms_norm in the compute dtype.
#include "mixprec/layers/rms_normalization.h"

#include <string>

#include "layers/add_norm_fusion.h"
#include "layers/layer_config.h"
#include "layers/norm_layer_checks.h"
#include "mixprec/error.h"
#include "mixprec/transformer_ops.h"

namespace mixprec::layers {

namespace {

class RMSNormalizationImpl final : public LayerImpl {
 public:
  explicit RMSNormalizationImpl(const RMSNormalizationOptions& o)
      : LayerImpl("RMSNormalization", {o.dtype, o.name, o.trainable}), o_(o) {
    detail::check_norm_epsilon(name(), "RMSNormalization", o.epsilon);
  }

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["axis"] = o_.axis;
    c["epsilon"] = o_.epsilon;
    c["scale_initializer"] =
        detail::initializer_config(o_.scale_initializer, name(), "scale_initializer");
    return c;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    detail::check_norm_input(name(), "RMSNormalization", o_.axis, shapes[0],
                             built() ? scale_.dim(0) : -1);
  }

  void build(const std::vector<PartialShape>& shapes) override {
    scale_ = add_weight("scale", Shape{shapes[0].back()}, o_.scale_initializer, Trainable::yes,
                        detail::norm_param_dtype(variable_dtype()));
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {shapes[0]};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    detail::check_norm_floating(name(), "RMSNormalization", inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (..., C) in the compute dtype
    detail::check_norm_floating(name(), "RMSNormalization", x.dtype());
    const detail::FusedNormParameters p = parameters(x);
    return {rms_norm(x, p.gamma, p.epsilon)};
  }

  // What call() passes to rms_norm for x (the Add fusion takes the same).
  detail::FusedNormParameters parameters(const Tensor& x) const {
    const DType param = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
    detail::FusedNormParameters p;
    p.rms = true;
    p.gamma = scale_.to(param);
    p.epsilon = o_.epsilon;
    return p;
  }

  // Whether call_eager would pass x to call() as it is: built, x in the compute dtype, the shape
  // validate() accepts.
  bool takes_as_is(const Tensor& x) const {
    const int rank = x.rank();
    return built() && is_floating(x.dtype()) && autocast_dtype(x.dtype()) == x.dtype() &&
           rank >= 2 && (o_.axis == -1 || o_.axis == rank - 1) && x.dim(-1) == scale_.dim(0);
  }

  RMSNormalizationOptions o_;
  Tensor scale_;
};

const RMSNormalizationImpl& rms_impl(const Layer& layer) {
  return static_cast<const RMSNormalizationImpl&>(layer.impl());
}

}  // namespace

bool detail::is_rms_normalization(const Layer& layer) {
  return dynamic_cast<const RMSNormalizationImpl*>(layer.impl_ptr().get()) != nullptr;
}

std::optional<detail::FusedNormParameters> detail::rms_norm_parameters(const Layer& layer,
                                                                       const Tensor& x) {
  const auto* rms = dynamic_cast<const RMSNormalizationImpl*>(layer.impl_ptr().get());
  if (rms == nullptr || !rms->takes_as_is(x)) return std::nullopt;
  return rms->parameters(x);
}

RMSNormalization::RMSNormalization(RMSNormalizationOptions options)
    : Layer(std::make_shared<RMSNormalizationImpl>(options)) {}

RMSNormalization::RMSNormalization(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<RMSNormalizationImpl*>(&impl()) == nullptr) {
    throw ValueError("RMSNormalization: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a RMSNormalization");
  }
}

int RMSNormalization::axis() const { return rms_impl(*this).o_.axis; }
double RMSNormalization::epsilon() const { return rms_impl(*this).o_.epsilon; }
Tensor RMSNormalization::scale() const {
  const RMSNormalizationImpl& r = rms_impl(*this);
  if (!r.built()) {
    throw ValueError(r.name() +
                     ": scale does not exist until the layer is built; call the layer on an input "
                     "(or on mp::Input) first");
  }
  return r.scale_;
}

}  // namespace mixprec::layers
