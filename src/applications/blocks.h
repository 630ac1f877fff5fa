// Building blocks shared by the convolutional models of the zoo (cnn.cpp, efficientnet.cpp,
// resnet.cpp): option checks, the image input, Conv2D -> BatchNormalization -> activation, and
// the float32 classifier head. Internal; inline because the zoo has no .cpp of its own for them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/applications.h"
#include "mixprec/error.h"
#include "mixprec/layers/activation.h"
#include "mixprec/layers/batch_normalization.h"
#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/keras_tensor.h"
#include "mixprec/layers/pooling.h"
#include "mixprec/mixed_precision/policy.h"

namespace mixprec::applications::detail {

// Throws ValueError "<model>: <field> must be >= <minimum>, got <value>".
inline void check_at_least(const std::string& model, const char* field, std::int64_t value,
                           std::int64_t minimum) {
  if (value < minimum) {
    throw ValueError("applications::" + model + ": " + field +
                     " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  }
}

// Checks input_size >= 32 (as keras.applications), channels >= 1 and, with include_top,
// classes >= 2.
inline void check_image_options(const std::string& model, const ImageModelOptions& o) {
  check_at_least(model, "input_size", o.input_size, 32);
  check_at_least(model, "channels", o.channels, 1);
  if (o.include_top) check_at_least(model, "classes", o.classes, 2);
}

// Input((size, size, channels)) named "images", float32 (the first layer autocasts it).
inline KerasTensor image_input(std::int64_t size, std::int64_t channels) {
  return Input({size, size, channels}, {.name = "images"});
}

// What every layer of one model shares: its policy and the BatchNormalization constants.
struct BlockContext {
  std::optional<mixed_precision::Policy> dtype;
  double bn_momentum = 0.99;  // Keras defaults
  double bn_epsilon = 1e-3;
};

// One convolution followed by BatchNormalization and an activation (none when `activation` is
// empty), named prefix + conv_suffix, prefix + bn_suffix and prefix + activation_suffix.
struct ConvBnAct {
  std::int64_t filters = 0;
  layers::Size2d kernel = 1;
  layers::Size2d strides = 1;
  layers::PaddingMode padding = Padding::same;
  bool use_bias = false;
  std::string activation{};  // "" = none (a linear projection)
  std::string prefix{};
  std::string conv_suffix = "_conv";
  std::string bn_suffix = "_bn";
  std::string activation_suffix = "_activation";
};

inline layers::BatchNormalizationOptions bn_options(const BlockContext& c, std::string name) {
  layers::BatchNormalizationOptions o;
  o.momentum = c.bn_momentum;
  o.epsilon = c.bn_epsilon;
  o.dtype = c.dtype;
  o.name = std::move(name);
  return o;
}

inline KerasTensor conv_bn_act(const BlockContext& c, const KerasTensor& x, const ConvBnAct& s) {
  layers::Conv2DOptions conv;
  conv.strides = s.strides;
  conv.padding = s.padding;
  conv.use_bias = s.use_bias;
  conv.dtype = c.dtype;
  conv.name = s.prefix + s.conv_suffix;
  KerasTensor y = layers::Conv2D(s.filters, s.kernel, conv)(x);
  y = layers::BatchNormalization(bn_options(c, s.prefix + s.bn_suffix))(y);
  if (!s.activation.empty()) {
    y = layers::Activation(s.activation,
                           {.dtype = c.dtype, .name = s.prefix + s.activation_suffix})(y);
  }
  return y;
}

// (batch, h, w, C) -> GlobalAveragePooling2D "avg_pool" -> (batch, C) -> Dense(classes)
// "dense_logits" (compute dtype) -> Activation("softmax", dtype float32) "predictions": the
// softmax of 16-bit logits loses precision, so the output is float32 whatever the policy.
inline KerasTensor classifier_head(const BlockContext& c, const KerasTensor& features,
                                   std::int64_t classes) {
  KerasTensor x = layers::GlobalAveragePooling2D({.dtype = c.dtype, .name = "avg_pool"})(features);
  x = layers::Dense(classes, {.activation = "", .dtype = c.dtype, .name = "dense_logits"})(x);
  return layers::Activation(
      "softmax", {.dtype = mixed_precision::Policy("float32"), .name = "predictions"})(x);
}

}  // namespace mixprec::applications::detail
