// Conv2D: x (batch, H, W, Cin), K (KH, KW, Cin / groups, filters), b (filters,)
// -> y (batch, OH, OW, filters). Also the spatial-argument types of conv2d.h (Size2d, PaddingMode).
#include "mixprec/layers/conv2d.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/mixed_precision/policy.h"
#include "ops/window.h"

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

class Conv2DImpl final : public LayerImpl {
 public:
  Conv2DImpl(std::int64_t filters, Size2d kernel_size, const Conv2DOptions& o)
      : LayerImpl("Conv2D", {o.dtype, o.name, o.trainable}),
        filters_(filters),
        kernel_size_(kernel_size),
        strides_(o.strides),
        padding_(o.padding),
        dilation_(o.dilation_rate),
        groups_(o.groups),
        activation_(o.activation),
        use_bias_(o.use_bias),
        kernel_initializer_(o.kernel_initializer),
        bias_initializer_(o.bias_initializer) {
    auto positive = [&](const char* what, std::int64_t v, const std::string& shown) {
      if (v < 1) {
        throw ValueError(name() + ": Conv2D " + what + " must be positive, got " + shown);
      }
    };
    positive("filters", filters, std::to_string(filters));
    positive("kernel_size", std::min(kernel_size.height, kernel_size.width),
             kernel_size.to_string());
    positive("strides", std::min(strides_.height, strides_.width), strides_.to_string());
    positive("dilation_rate", std::min(dilation_.height, dilation_.width), dilation_.to_string());
    positive("groups", groups_, std::to_string(groups_));
    if (filters % groups_ != 0) {
      throw ValueError(name() + ": Conv2D filters (" + std::to_string(filters) +
                       ") must be divisible by groups (" + std::to_string(groups_) + ")");
    }
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
                       ": Conv2D expects a rank-4 input (batch, height, width, channels), "
                       "got shape " +
                       partial_shape_to_string(s) +
                       "; add a channel axis with Reshape (e.g. (28, 28) -> (28, 28, 1))");
    }
    if (s[3] < 0) {
      throw ShapeError(name() + ": Conv2D needs a known channel axis (last), got shape " +
                       partial_shape_to_string(s) + "; give mp::Input the channel count");
    }
    if (kernel_.defined() && s[3] != kernel_.dim(2) * groups_) {
      throw ShapeError(name() + ": expected an input with " +
                       std::to_string(kernel_.dim(2) * groups_) +
                       " channels (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same channel "
                       "count or use a new layer");
    }
    if (s[3] % groups_ != 0) {
      throw ShapeError(name() + ": Conv2D with groups = " + std::to_string(groups_) +
                       " needs input channels divisible by it, got shape " +
                       partial_shape_to_string(s));
    }
    compute_output_shape(shapes);  // a window larger than a known valid input: ValueError
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t in = shapes[0][3] / groups_;
    kernel_ = add_weight("kernel", Shape{kernel_size_.height, kernel_size_.width, in, filters_},
                         kernel_initializer_);
    if (use_bias_) bias_ = add_weight("bias", Shape{filters_}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    const std::string op = name() + " (Conv2D)";
    auto out = [&](std::int64_t in, const char* axis, int k, int stride, int dilation) {
      if (in < 0) return std::int64_t{-1};
      return ops::window_dim(op.c_str(), axis, in, k, stride, dilation, padding_.value()).out;
    };
    return {{s[0], out(s[1], "height", kernel_size_.height, strides_.height, dilation_.height),
             out(s[2], "width", kernel_size_.width, strides_.width, dilation_.width), filters_}};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, H, W, Cin) in the compute dtype
    check_floating(x.dtype());
    Conv2dOptions conv;
    conv.strides = {strides_.height, strides_.width};
    conv.padding = padding_.value();
    conv.dilation = {dilation_.height, dilation_.width};
    conv.groups = groups_;
    // Switch 0 rounds every partial sum to the 16-bit compute dtype (the slow reference path on
    // the CPU); otherwise partial sums are float32.
    conv.accumulation = is_16bit_float(x.dtype()) && accumulation_dtype() == x.dtype()
                            ? Accumulation::compute_dtype
                            : Accumulation::float32;
    const Tensor y = conv2d(x, read(kernel_), use_bias_ ? read(bias_) : Tensor(), conv);
    return {apply_activation(activation_, y)};
  }

  void check_floating(DType dtype) const {
    if (!is_floating(dtype)) {
      throw DTypeError(name() + ": Conv2D needs a floating input, got " +
                       std::string(dtype_name(dtype)) +
                       "; convert it first, e.g. x.to(mp::kFloat32) (and scale it, e.g. / 255)");
    }
  }

  std::int64_t filters_;
  Size2d kernel_size_, strides_;
  PaddingMode padding_;
  Size2d dilation_;
  int groups_;
  std::string activation_;
  bool use_bias_;
  initializers::Initializer kernel_initializer_;
  initializers::Initializer bias_initializer_;
  Tensor kernel_, bias_;
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
Size2d Conv2D::kernel_size() const { return conv_impl(*this).kernel_size_; }
Size2d Conv2D::strides() const { return conv_impl(*this).strides_; }
PaddingMode Conv2D::padding() const { return conv_impl(*this).padding_; }
Size2d Conv2D::dilation_rate() const { return conv_impl(*this).dilation_; }
int Conv2D::groups() const { return conv_impl(*this).groups_; }
const std::string& Conv2D::activation() const { return conv_impl(*this).activation_; }
bool Conv2D::use_bias() const { return conv_impl(*this).use_bias_; }

Tensor Conv2D::kernel() const {
  const Conv2DImpl& c = conv_impl(*this);
  if (!c.kernel_.defined()) {
    throw ValueError(c.name() +
                     ": the kernel does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return c.kernel_;
}

Tensor Conv2D::bias() const {
  const Conv2DImpl& c = conv_impl(*this);
  if (!c.built()) {
    throw ValueError(c.name() +
                     ": the bias does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return c.bias_;
}

}  // namespace mixprec::layers
