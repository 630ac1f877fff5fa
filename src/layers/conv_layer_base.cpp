#include "layers/conv_layer_base.h"

#include <algorithm>

#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/mixed_precision/policy.h"
#include "ops/window.h"

namespace mixprec::layers {

ConvLayerBase::ConvLayerBase(std::string class_name, const LayerOptions& options,
                             const ConvGeometry& geometry, std::string activation, bool use_bias)
    : LayerImpl(std::move(class_name), options),
      geometry_(geometry),
      activation_(std::move(activation)),
      use_bias_(use_bias) {
  const ConvGeometry& g = geometry_;
  check_positive("kernel_size", std::min(g.kernel_size.height, g.kernel_size.width),
                 g.kernel_size.to_string());
  check_positive("strides", std::min(g.strides.height, g.strides.width), g.strides.to_string());
  check_positive("dilation_rate", std::min(g.dilation.height, g.dilation.width),
                 g.dilation.to_string());
  check_activation_name(activation_, name());
}

DType ConvLayerBase::accumulation_dtype() const {
  const DType compute = compute_dtype();
  if (compute == DType::float64) return DType::float64;
  if (is_16bit_float(compute) && !mixed_precision::fp16_conv_use_fp32_compute()) return compute;
  return DType::float32;
}

std::vector<TensorSpec> ConvLayerBase::compute_output_spec(
    const std::vector<TensorSpec>& inputs) const {
  check_floating(inputs[0].dtype);
  return LayerImpl::compute_output_spec(inputs);
}

Tensor ConvLayerBase::built_variable(const Tensor& variable, const char* what) const {
  if (!built()) {
    throw ValueError(name() + ": the " + what +
                     " does not exist until the layer is built; call the layer on an input (or "
                     "on mp::Input) first");
  }
  return variable;
}

void ConvLayerBase::check_positive(const char* what, std::int64_t value,
                                   const std::string& shown) const {
  if (value < 1) {
    throw ValueError(name() + ": " + class_name() + " " + what + " must be positive, got " + shown);
  }
}

void ConvLayerBase::validate_input(const PartialShape& s, std::int64_t built_channels) const {
  if (s.size() != 4) {
    throw ShapeError(name() + ": " + class_name() +
                     " expects a rank-4 input (batch, height, width, channels), got shape " +
                     partial_shape_to_string(s) +
                     "; add a channel axis with Reshape (e.g. (28, 28) -> (28, 28, 1))");
  }
  if (s[3] < 0) {
    throw ShapeError(name() + ": " + class_name() + " needs a known channel axis (last), got " +
                     "shape " + partial_shape_to_string(s) + "; give mp::Input the channel count");
  }
  if (built_channels > 0 && s[3] != built_channels) {
    throw ShapeError(name() + ": expected an input with " + std::to_string(built_channels) +
                     " channels (last axis), got shape " + partial_shape_to_string(s) +
                     "; the layer was built on its first call, so feed it the same channel "
                     "count or use a new layer");
  }
}

PartialShape ConvLayerBase::output_shape(const PartialShape& s, std::int64_t out_channels) const {
  const ConvGeometry& g = geometry_;
  const std::string op = name() + " (" + class_name() + ")";
  auto out = [&](std::int64_t in, const char* axis, int k, int stride, int dilation) {
    if (in < 0) return std::int64_t{-1};
    return ops::window_dim(op.c_str(), axis, in, k, stride, dilation, g.padding.value()).out;
  };
  return {s[0], out(s[1], "height", g.kernel_size.height, g.strides.height, g.dilation.height),
          out(s[2], "width", g.kernel_size.width, g.strides.width, g.dilation.width), out_channels};
}

Conv2dOptions ConvLayerBase::conv_options(DType dtype, int groups) const {
  const ConvGeometry& g = geometry_;
  Conv2dOptions conv;
  conv.strides = {g.strides.height, g.strides.width};
  conv.padding = g.padding.value();
  conv.dilation = {g.dilation.height, g.dilation.width};
  conv.groups = groups;
  // Switch 0 rounds every partial sum to the 16-bit compute dtype (the slow reference path on
  // the CPU); otherwise partial sums are float32.
  conv.accumulation = is_16bit_float(dtype) && accumulation_dtype() == dtype
                          ? Accumulation::compute_dtype
                          : Accumulation::float32;
  return conv;
}

void ConvLayerBase::check_floating(DType dtype) const {
  if (!is_floating(dtype)) {
    throw DTypeError(name() + ": " + class_name() + " needs a floating input, got " +
                     std::string(dtype_name(dtype)) +
                     "; convert it first, e.g. x.to(mp::kFloat32) (and scale it, e.g. / 255)");
  }
}

}  // namespace mixprec::layers
