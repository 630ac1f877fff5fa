// DepthwiseConv2D: x (batch, H, W, C), K (KH, KW, C, M), b (C * M,) -> y (batch, OH, OW, C * M).
#include "mixprec/layers/depthwise_conv2d.h"

#include <algorithm>
#include <string>

#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/mixed_precision/policy.h"
#include "ops/window.h"

namespace mixprec::layers {

namespace {

class DepthwiseConv2DImpl final : public LayerImpl {
 public:
  DepthwiseConv2DImpl(Size2d kernel_size, const DepthwiseConv2DOptions& o)
      : LayerImpl("DepthwiseConv2D", {o.dtype, o.name, o.trainable}),
        kernel_size_(kernel_size),
        strides_(o.strides),
        padding_(o.padding),
        multiplier_(o.depth_multiplier),
        dilation_(o.dilation_rate),
        activation_(o.activation),
        use_bias_(o.use_bias),
        kernel_initializer_(o.depthwise_initializer),
        bias_initializer_(o.bias_initializer) {
    auto positive = [&](const char* what, int v, const std::string& shown) {
      if (v < 1) {
        throw ValueError(name() + ": DepthwiseConv2D " + what + " must be positive, got " + shown);
      }
    };
    positive("kernel_size", std::min(kernel_size.height, kernel_size.width),
             kernel_size.to_string());
    positive("strides", std::min(strides_.height, strides_.width), strides_.to_string());
    positive("dilation_rate", std::min(dilation_.height, dilation_.width), dilation_.to_string());
    positive("depth_multiplier", multiplier_, std::to_string(multiplier_));
    check_activation_name(activation_, name());
  }

  bool uses_matmul() const override { return true; }

  // DESIGN §2.4 for convolutions: the conv switch, not the matmul one.
  DType accumulation_dtype() const override {
    const DType compute = compute_dtype();
    if (compute == DType::float64) return DType::float64;
    if (is_16bit_float(compute) && !mixed_precision::fp16_conv_use_fp32_compute()) return compute;
    return DType::float32;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (s.size() != 4) {
      throw ShapeError(name() +
                       ": DepthwiseConv2D expects a rank-4 input (batch, height, width, "
                       "channels), got shape " +
                       partial_shape_to_string(s) + "; add a channel axis with Reshape");
    }
    if (s[3] < 0) {
      throw ShapeError(name() + ": DepthwiseConv2D needs a known channel axis (last), got shape " +
                       partial_shape_to_string(s) + "; give mp::Input the channel count");
    }
    if (kernel_.defined() && s[3] != kernel_.dim(2)) {
      throw ShapeError(name() + ": expected an input with " + std::to_string(kernel_.dim(2)) +
                       " channels (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same channel "
                       "count or use a new layer");
    }
    compute_output_shape(shapes);  // a window larger than a known valid input: ValueError
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t channels = shapes[0][3];
    kernel_ = add_weight("depthwise_kernel",
                         Shape{kernel_size_.height, kernel_size_.width, channels, multiplier_},
                         kernel_initializer_);
    if (use_bias_) bias_ = add_weight("bias", Shape{channels * multiplier_}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    const std::string op = name() + " (DepthwiseConv2D)";
    auto out = [&](std::int64_t in, const char* axis, int k, int stride, int dilation) {
      if (in < 0) return std::int64_t{-1};
      return ops::window_dim(op.c_str(), axis, in, k, stride, dilation, padding_.value()).out;
    };
    return {{s[0], out(s[1], "height", kernel_size_.height, strides_.height, dilation_.height),
             out(s[2], "width", kernel_size_.width, strides_.width, dilation_.width),
             s[3] < 0 ? -1 : s[3] * multiplier_}};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, H, W, C) in the compute dtype
    check_floating(x.dtype());
    Conv2dOptions conv;
    conv.strides = {strides_.height, strides_.width};
    conv.padding = padding_.value();
    conv.dilation = {dilation_.height, dilation_.width};
    conv.accumulation = is_16bit_float(x.dtype()) && accumulation_dtype() == x.dtype()
                            ? Accumulation::compute_dtype
                            : Accumulation::float32;
    const Tensor y = depthwise_conv2d(x, read(kernel_), use_bias_ ? read(bias_) : Tensor(), conv);
    return {apply_activation(activation_, y)};
  }

  void check_floating(DType dtype) const {
    if (!is_floating(dtype)) {
      throw DTypeError(name() + ": DepthwiseConv2D needs a floating input, got " +
                       std::string(dtype_name(dtype)) +
                       "; convert it first, e.g. x.to(mp::kFloat32)");
    }
  }

  Size2d kernel_size_, strides_;
  PaddingMode padding_;
  int multiplier_;
  Size2d dilation_;
  std::string activation_;
  bool use_bias_;
  initializers::Initializer kernel_initializer_;
  initializers::Initializer bias_initializer_;
  Tensor kernel_, bias_;
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

Size2d DepthwiseConv2D::kernel_size() const { return dw_impl(*this).kernel_size_; }
Size2d DepthwiseConv2D::strides() const { return dw_impl(*this).strides_; }
PaddingMode DepthwiseConv2D::padding() const { return dw_impl(*this).padding_; }
int DepthwiseConv2D::depth_multiplier() const { return dw_impl(*this).multiplier_; }
Size2d DepthwiseConv2D::dilation_rate() const { return dw_impl(*this).dilation_; }
const std::string& DepthwiseConv2D::activation() const { return dw_impl(*this).activation_; }
bool DepthwiseConv2D::use_bias() const { return dw_impl(*this).use_bias_; }

Tensor DepthwiseConv2D::depthwise_kernel() const {
  const DepthwiseConv2DImpl& d = dw_impl(*this);
  if (!d.kernel_.defined()) {
    throw ValueError(d.name() +
                     ": the depthwise kernel does not exist until the layer is built; call the "
                     "layer on an input (or on mp::Input) first");
  }
  return d.kernel_;
}

Tensor DepthwiseConv2D::bias() const {
  const DepthwiseConv2DImpl& d = dw_impl(*this);
  if (!d.built()) {
    throw ValueError(d.name() +
                     ": the bias does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return d.bias_;
}

}  // namespace mixprec::layers
