// DepthwiseConv2D: x (batch, H, W, C), K (KH, KW, C, M), b (C * M,) -> y (batch, OH, OW, C * M).
#include "mixprec/layers/depthwise_conv2d.h"

#include <algorithm>
#include <string>

#include "layers/conv_layer_base.h"
#include "layers/layer_config.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "ops/autocast_conv.h"

namespace mixprec::layers {

namespace {

class DepthwiseConv2DImpl final : public ConvLayerBase {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["kernel_size"] = detail::size2d_config(geometry().kernel_size);
    c["strides"] = detail::size2d_config(geometry().strides);
    c["padding"] = std::string(geometry().padding.name());
    c["depth_multiplier"] = multiplier_;
    c["dilation_rate"] = detail::size2d_config(geometry().dilation);
    c["activation"] = activation();
    c["use_bias"] = use_bias();
    c["depthwise_initializer"] =
        detail::initializer_config(kernel_initializer_, name(), "depthwise_initializer");
    c["bias_initializer"] =
        detail::initializer_config(bias_initializer_, name(), "bias_initializer");
    return c;
  }
  DepthwiseConv2DImpl(Size2d kernel_size, const DepthwiseConv2DOptions& o)
      : ConvLayerBase("DepthwiseConv2D", {o.dtype, o.name, o.trainable},
                      {kernel_size, o.strides, o.padding, o.dilation_rate}, o.activation,
                      o.use_bias),
        multiplier_(o.depth_multiplier),
        kernel_initializer_(o.depthwise_initializer),
        bias_initializer_(o.bias_initializer) {
    check_positive("depth_multiplier", multiplier_, std::to_string(multiplier_));
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    validate_input(shapes[0], kernel_.defined() ? kernel_.dim(2) : 0);
    compute_output_shape(shapes);  // a window larger than a known valid input: ValueError
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t channels = shapes[0][3];
    const Size2d k = geometry().kernel_size;
    kernel_ = add_weight("depthwise_kernel", Shape{k.height, k.width, channels, multiplier_},
                         kernel_initializer_);
    if (use_bias()) bias_ = add_weight("bias", Shape{channels * multiplier_}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    return {output_shape(s, s[3] < 0 ? -1 : s[3] * multiplier_)};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, H, W, C) in the compute dtype
    check_floating(x.dtype());
    const Conv2dOptions options = conv_options(x.dtype(), 1);
    // Under a mixed policy the variables are read in the compute dtype inside the op
    // (ops/autocast_conv.h).
    const Tensor y =
        variable_dtype() != compute_dtype()
            ? ops::autocast_depthwise_conv2d(x, kernel_, use_bias() ? bias_ : Tensor(), options)
            : depthwise_conv2d(x, read(kernel_), use_bias() ? read(bias_) : Tensor(), options);
    return {apply_activation(activation(), y)};
  }

  int multiplier_;
  initializers::Initializer kernel_initializer_;
  initializers::Initializer bias_initializer_;
};

const DepthwiseConv2DImpl& dw_impl(const Layer& layer) {
  return static_cast<const DepthwiseConv2DImpl&>(layer.impl());
}

}  // namespace

DepthwiseConv2D::DepthwiseConv2D(Size2d kernel_size, DepthwiseConv2DOptions options)
    : Layer(std::make_shared<DepthwiseConv2DImpl>(kernel_size, options)) {}

DepthwiseConv2D::DepthwiseConv2D(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<DepthwiseConv2DImpl*>(&impl()) == nullptr) {
    throw ValueError("DepthwiseConv2D: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a DepthwiseConv2D");
  }
}

Size2d DepthwiseConv2D::kernel_size() const { return dw_impl(*this).geometry().kernel_size; }
Size2d DepthwiseConv2D::strides() const { return dw_impl(*this).geometry().strides; }
PaddingMode DepthwiseConv2D::padding() const { return dw_impl(*this).geometry().padding; }
int DepthwiseConv2D::depth_multiplier() const { return dw_impl(*this).multiplier_; }
Size2d DepthwiseConv2D::dilation_rate() const { return dw_impl(*this).geometry().dilation; }
const std::string& DepthwiseConv2D::activation() const { return dw_impl(*this).activation(); }
bool DepthwiseConv2D::use_bias() const { return dw_impl(*this).use_bias(); }
Tensor DepthwiseConv2D::depthwise_kernel() const {
  const DepthwiseConv2DImpl& d = dw_impl(*this);
  return d.built_variable(d.kernel_, "depthwise kernel");
}
Tensor DepthwiseConv2D::bias() const {
  const DepthwiseConv2DImpl& d = dw_impl(*this);
  return d.built_variable(d.bias_, "bias");
}

}  // namespace mixprec::layers
