// BatchNormalization: x (..., C) in the compute dtype; gamma, beta, moving_mean, moving_variance
// (C,) float32 (float64 under a float64 policy), whatever the policy, as in Keras.
#include "mixprec/layers/batch_normalization.h"

#include <optional>
#include <string>
#include <utility>

#include "layers/activation_fusion.h"
#include "layers/layer_config.h"
#include "layers/sync_batch_norm.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "ops/batch_norm_activation.h"
#include "ops/moving_average.h"

namespace mixprec::layers {

namespace {

class BatchNormalizationImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["axis"] = o_.axis;
    c["momentum"] = o_.momentum;
    c["epsilon"] = o_.epsilon;
    c["center"] = o_.center;
    c["scale"] = o_.scale;
    if (o_.synchronized) c["synchronized"] = true;  // absent: false (configs before the option)
    c["beta_initializer"] =
        detail::initializer_config(o_.beta_initializer, name(), "beta_initializer");
    c["gamma_initializer"] =
        detail::initializer_config(o_.gamma_initializer, name(), "gamma_initializer");
    c["moving_mean_initializer"] =
        detail::initializer_config(o_.moving_mean_initializer, name(), "moving_mean_initializer");
    c["moving_variance_initializer"] = detail::initializer_config(
        o_.moving_variance_initializer, name(), "moving_variance_initializer");
    return c;
  }
  explicit BatchNormalizationImpl(const BatchNormalizationOptions& o)
      : LayerImpl("BatchNormalization", {o.dtype, o.name, o.trainable}), o_(o) {
    if (!(o.momentum >= 0.0 && o.momentum <= 1.0)) {
      throw ValueError(name() + ": BatchNormalization momentum must be in [0, 1], got " +
                       std::to_string(o.momentum) + " (Keras momentum = 1 - PyTorch momentum)");
    }
    if (!(o.epsilon > 0.0)) {
      throw ValueError(name() + ": BatchNormalization epsilon must be positive, got " +
                       std::to_string(o.epsilon));
    }
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    const int rank = static_cast<int>(s.size());
    if (rank < 2) {
      throw ShapeError(name() + ": BatchNormalization expects an input (batch, ..., channels), " +
                       "got shape " + partial_shape_to_string(s));
    }
    if (o_.axis != -1 && o_.axis != rank - 1) {
      throw ValueError(name() +
                       ": BatchNormalization normalises over the last axis only (axis "
                       "= -1 or " +
                       std::to_string(rank - 1) + " here), got axis = " + std::to_string(o_.axis) +
                       "; keep the data channels-last (NHWC)");
    }
    if (s.back() < 0) {
      throw ShapeError(name() + ": BatchNormalization needs a known channel axis (last), got " +
                       "shape " + partial_shape_to_string(s));
    }
    if (moving_mean_.defined() && s.back() != moving_mean_.dim(0)) {
      throw ShapeError(name() + ": expected an input with " + std::to_string(moving_mean_.dim(0)) +
                       " channels (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same channel "
                       "count or use a new layer");
    }
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const Shape c{shapes[0].back()};
    // Keras (_param_dtype): under a pure float16/bfloat16 policy too, the parameters and moving
    // statistics are float32; a 16-bit moving variance would round away the (1 - momentum)
    // updates and float16 would overflow on large activations.
    const DType v = variable_dtype();
    const DType param = v == DType::float16 || v == DType::bfloat16 ? DType::float32 : v;
    if (o_.scale) gamma_ = add_weight("gamma", c, o_.gamma_initializer, Trainable::yes, param);
    if (o_.center) beta_ = add_weight("beta", c, o_.beta_initializer, Trainable::yes, param);
    moving_mean_ = add_weight("moving_mean", c, o_.moving_mean_initializer, Trainable::no, param);
    moving_variance_ =
        add_weight("moving_variance", c, o_.moving_variance_initializer, Trainable::no, param);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {shapes[0]};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override {
    const Tensor& x = inputs[0];  // (..., C) in the compute dtype
    check_floating(x.dtype());
    // The float32 island: parameters and statistics go to the op in float32 whatever the compute
    // dtype (a no-op under mixed policies, where the variables are float32 already).
    const DType param = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
    const Shape c{x.dim(-1)};
    const Tensor gamma =
        o_.scale ? gamma_.to(param) : ones(c, {.dtype = param, .device = x.device()});
    const Tensor beta =
        o_.center ? beta_.to(param) : zeros(c, {.dtype = param, .device = x.device()});
    const std::optional<UnaryOp> act = detail::take_fused_activation();
    if (!(options.training && trainable())) {
      if (act) {
        return {ops::batch_norm_activation_inference(x, gamma, beta, moving_mean_.to(param),
                                                     moving_variance_.to(param), o_.epsilon, *act)};
      }
      return {batch_norm_inference(x, gamma, beta, moving_mean_.to(param),
                                   moving_variance_.to(param), o_.epsilon)};
    }
    if (o_.synchronized && distributed::world_size() > 1) {  // src/layers/sync_batch_norm.cpp
      const detail::SyncBatchNormOutput s =
          detail::sync_batch_norm_training(x, gamma, beta, o_.epsilon);
      update_moving_statistics(s.out, s.count, param);
      return {s.out.y};
    }
    BatchNormOutput out =
        act ? ops::batch_norm_activation_training(x, gamma, beta, o_.epsilon, *act)
            : batch_norm_training(x, gamma, beta, o_.epsilon);
    update_moving_statistics(out, x.numel() / x.dim(-1), param);
    return {out.y};
  }

  // moving = moving * momentum + batch * (1 - momentum), with the unbiased batch variance
  // (n / (n - 1); n = values per channel; n = 1 keeps the biased one, which is then 0).
  void update_moving_statistics(const BatchNormOutput& out, std::int64_t n, DType param) {
    NoGradScope no_grad;
    const double m = o_.momentum;
    const double bessel = n > 1 ? static_cast<double>(n) / static_cast<double>(n - 1) : 1.0;
    const Tensor mean = out.mean.detach().to(param), variance = out.variance.detach().to(param);
    // Variables of another dtype than this call's statistics (a layer built on float32 input and
    // called on float64): computed in `param` and converted on assignment, as before.
    if (moving_mean_.dtype() == param && moving_variance_.dtype() == param) {
      // In place, one launch for both (the same roundings as the composition below).
      const MovingAverageOperand operands[] = {{moving_mean_, mean, 1.0 - m},
                                               {moving_variance_, variance, bessel * (1.0 - m)}};
      ops::moving_average_update(name().c_str(), operands, m);
      return;
    }
    moving_mean_.assign(moving_mean_.to(param) * m + mean * (1.0 - m));
    moving_variance_.assign(moving_variance_.to(param) * m + variance * (bessel * (1.0 - m)));
  }

  void check_floating(DType dtype) const {
    if (!is_floating(dtype)) {
      throw DTypeError(name() + ": BatchNormalization needs a floating input, got " +
                       std::string(dtype_name(dtype)) +
                       "; convert it first, e.g. x.to(mp::kFloat32)");
    }
  }

  DType output_dtype(DType input_dtype) const { return autocast_dtype(input_dtype); }

  BatchNormalizationOptions o_;
  Tensor gamma_, beta_, moving_mean_, moving_variance_;
};

const BatchNormalizationImpl& bn_impl(const Layer& layer) {
  return static_cast<const BatchNormalizationImpl&>(layer.impl());
}

Tensor built_variable(const BatchNormalizationImpl& b, const Tensor& v, const char* what) {
  if (!b.built()) {
    throw ValueError(b.name() + ": " + what +
                     " does not exist until the layer is built; call the layer on an input (or on "
                     "mp::Input) first");
  }
  return v;
}

}  // namespace

// A synchronized layer is never fused: its statistics come from the whole group
// (sync_batch_norm.cpp), which the fused kernel does not compute.
std::optional<DType> detail::fusable_batch_norm_output(const Layer& layer, DType input_dtype) {
  const auto* bn = dynamic_cast<const BatchNormalizationImpl*>(layer.impl_ptr().get());
  if (bn == nullptr || bn->o_.synchronized) return std::nullopt;
  return bn->output_dtype(input_dtype);
}

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(std::make_shared<BatchNormalizationImpl>(options)) {}

BatchNormalization::BatchNormalization(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<BatchNormalizationImpl*>(&impl()) == nullptr) {
    throw ValueError("BatchNormalization: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a BatchNormalization");
  }
}

double BatchNormalization::momentum() const { return bn_impl(*this).o_.momentum; }
double BatchNormalization::epsilon() const { return bn_impl(*this).o_.epsilon; }
bool BatchNormalization::center() const { return bn_impl(*this).o_.center; }
bool BatchNormalization::scale() const { return bn_impl(*this).o_.scale; }
bool BatchNormalization::synchronized() const { return bn_impl(*this).o_.synchronized; }
Tensor BatchNormalization::gamma() const {
  return built_variable(bn_impl(*this), bn_impl(*this).gamma_, "gamma");
}
Tensor BatchNormalization::beta() const {
  return built_variable(bn_impl(*this), bn_impl(*this).beta_, "beta");
}
Tensor BatchNormalization::moving_mean() const {
  return built_variable(bn_impl(*this), bn_impl(*this).moving_mean_, "moving_mean");
}
Tensor BatchNormalization::moving_variance() const {
  return built_variable(bn_impl(*this), bn_impl(*this).moving_variance_, "moving_variance");
}

}  // namespace mixprec::layers
