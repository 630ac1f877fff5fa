// DepthwiseConv2D: each input channel convolved with its own depth_multiplier filters.
//   x (batch, H, W, C) -> y (batch, OH, OW, C * depth_multiplier)
//   K (KH, KW, C, depth_multiplier) glorot_uniform, b (C * depth_multiplier,) zeros (Keras
//   layout); output channel c * depth_multiplier + m reads input channel c only.
// Padding, strides and dilation as Conv2D (conv2d.h); so is the dtype behaviour: float32
// variables read in the compute dtype under mixed policies, and the accumulation dtype follows
// mixed_precision::fp16_conv_use_fp32_compute() (DESIGN §2.4).
//
//   auto y = mp::layers::DepthwiseConv2D(3, {.strides = 2, .padding = "same"})(x);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct DepthwiseConv2DOptions {
  Size2d strides = 1;  // >= 1
  PaddingMode padding = Padding::valid;
  int depth_multiplier = 1;  // >= 1
  Size2d dilation_rate = 1;  // >= 1
  std::string activation;    // by name (see activations.h); "" = linear
  bool use_bias = true;
  initializers::Initializer depthwise_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class DepthwiseConv2D : public Layer {
 public:
  // Throws ValueError for a non-positive kernel size, strides, dilation or depth multiplier, or
  // an unknown activation.
  explicit DepthwiseConv2D(Size2d kernel_size, DepthwiseConv2DOptions options = {});
  // A handle to an existing DepthwiseConv2D (ValueError when `layer` is not one).
  explicit DepthwiseConv2D(const Layer& layer);

  Size2d kernel_size() const;
  Size2d strides() const;
  PaddingMode padding() const;
  int depth_multiplier() const;
  Size2d dilation_rate() const;
  const std::string& activation() const;
  bool use_bias() const;
  // The variables, once built (ValueError before); bias() is undefined without use_bias.
  Tensor depthwise_kernel() const;
  Tensor bias() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
