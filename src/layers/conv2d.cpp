// Conv2D: x (batch, H, W, Cin), K (KH, KW, Cin / groups, filters), b (filters,)
// -> y (batch, OH, OW, filters). Also the spatial-argument types of conv2d.h (Size2d, PaddingMode).
#include "mixprec/layers/conv2d.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include "layers/conv_layer_base.h"
#include "layers/layer_config.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "ops/autocast_conv.h"
#include "ops/batch_norm_activation.h"
#include "ops/conv_activation.h"

namespace mixprec::layers {

std::string Size2d::to_string() const {
  // Appended piece by piece: `"(" + std::to_string(...)` trips GCC 12's -Wrestrict false positive.
  std::string s = "(";
  s += std::to_string(height);
  s += ", ";
  s += std::to_string(width);
  s += ")";
  return s;
}

PaddingMode::PaddingMode(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "valid") {
    mode_ = Padding::valid;
  } else if (lower == "same") {
    mode_ = Padding::same;
  } else {
    throw ValueError("padding must be one of 'valid', 'same' (as Keras), got '" +
                     std::string(name) + "'");
  }
}

std::string_view PaddingMode::name() const { return mode_ == Padding::same ? "same" : "valid"; }

namespace {

class Conv2DImpl final : public ConvLayerBase {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["filters"] = filters_;
    c["kernel_size"] = detail::size2d_config(geometry().kernel_size);
    c["strides"] = detail::size2d_config(geometry().strides);
    c["padding"] = std::string(geometry().padding.name());
    c["dilation_rate"] = detail::size2d_config(geometry().dilation);
    c["groups"] = groups_;
    c["activation"] = activation();
    c["use_bias"] = use_bias();
    c["kernel_initializer"] =
        detail::initializer_config(kernel_initializer_, name(), "kernel_initializer");
    c["bias_initializer"] =
        detail::initializer_config(bias_initializer_, name(), "bias_initializer");
    return c;
  }
  Conv2DImpl(std::int64_t filters, Size2d kernel_size, const Conv2DOptions& o)
      : ConvLayerBase("Conv2D", {o.dtype, o.name, o.trainable},
                      {kernel_size, o.strides, o.padding, o.dilation_rate}, o.activation,
                      o.use_bias),
        filters_(filters),
        groups_(o.groups),
        kernel_initializer_(o.kernel_initializer),
        bias_initializer_(o.bias_initializer) {
    check_positive("filters", filters, std::to_string(filters));
    check_positive("groups", groups_, std::to_string(groups_));
    if (filters % groups_ != 0) {
      throw ValueError(name() + ": Conv2D filters (" + std::to_string(filters) +
                       ") must be divisible by groups (" + std::to_string(groups_) + ")");
    }
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    validate_input(s, kernel_.defined() ? kernel_.dim(2) * groups_ : 0);
    if (s[3] % groups_ != 0) {
      throw ShapeError(name() + ": Conv2D with groups = " + std::to_string(groups_) +
                       " needs input channels divisible by it, got shape " +
                       partial_shape_to_string(s));
    }
    compute_output_shape(shapes);  // a window larger than a known valid input: ValueError
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t in = shapes[0][3] / groups_;
    const Size2d k = geometry().kernel_size;
    kernel_ = add_weight("kernel", Shape{k.height, k.width, in, filters_}, kernel_initializer_);
    if (use_bias()) bias_ = add_weight("bias", Shape{filters_}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {output_shape(shapes[0], filters_)};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, H, W, Cin) in the compute dtype
    check_floating(x.dtype());
    const Conv2dOptions options = conv_options(x.dtype(), groups_);
    // relu / relu6 join the convolution's op (ops/conv_activation.h) unless MIXPREC_FUSION=0.
    const std::string& act = activation();
    std::optional<UnaryOp> fused;
    if ((act == "relu" || act == "relu6") && ops::batch_norm_activation_fusion_enabled()) {
      fused = act == "relu" ? UnaryOp::relu : UnaryOp::relu6;
    }
    if (variable_dtype() != compute_dtype()) {
      // The variables are read in the compute dtype inside the op (ops/autocast_conv.h).
      const Tensor y =
          ops::autocast_conv2d(x, kernel_, use_bias() ? bias_ : Tensor(), options, fused);
      return {fused ? y : apply_activation(act, y)};
    }
    const Tensor bias = use_bias() ? read(bias_) : Tensor();
    if (fused) return {ops::conv2d_activation(x, read(kernel_), bias, options, *fused)};
    return {apply_activation(act, conv2d(x, read(kernel_), bias, options))};
  }

  std::int64_t filters_;
  int groups_;
  initializers::Initializer kernel_initializer_;
  initializers::Initializer bias_initializer_;
};

const Conv2DImpl& conv_impl(const Layer& layer) {
  return static_cast<const Conv2DImpl&>(layer.impl());
}

}  // namespace

Conv2D::Conv2D(std::int64_t filters, Size2d kernel_size, Conv2DOptions options)
    : Layer(std::make_shared<Conv2DImpl>(filters, kernel_size, options)) {}

Conv2D::Conv2D(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<Conv2DImpl*>(&impl()) == nullptr) {
    throw ValueError("Conv2D: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a Conv2D");
  }
}

std::int64_t Conv2D::filters() const { return conv_impl(*this).filters_; }
Size2d Conv2D::kernel_size() const { return conv_impl(*this).geometry().kernel_size; }
Size2d Conv2D::strides() const { return conv_impl(*this).geometry().strides; }
PaddingMode Conv2D::padding() const { return conv_impl(*this).geometry().padding; }
Size2d Conv2D::dilation_rate() const { return conv_impl(*this).geometry().dilation; }
int Conv2D::groups() const { return conv_impl(*this).groups_; }
const std::string& Conv2D::activation() const { return conv_impl(*this).activation(); }
bool Conv2D::use_bias() const { return conv_impl(*this).use_bias(); }
Tensor Conv2D::kernel() const {
  const Conv2DImpl& c = conv_impl(*this);
  return c.built_variable(c.kernel_, "kernel");
}
Tensor Conv2D::bias() const {
  const Conv2DImpl& c = conv_impl(*this);
  return c.built_variable(c.bias_, "bias");
}

}  // namespace mixprec::layers
