// applications::resnet50: torchvision's ResNet-50 (v1.5) in NHWC (see
// include/mixprec/applications.h).
#include <string>

#include "applications/blocks.h"
#include "mixprec/applications.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/zero_padding2d.h"

namespace mixprec::applications {

namespace {

// One bottleneck block: (batch, h, w, in) -> (batch, h / stride, w / stride, 4 width).
// torchvision pads its 3x3 and 7x7 convolutions symmetrically; TensorFlow's `same` puts the odd
// padding row after the input when the stride is 2, so strided convolutions get an explicit
// ZeroPadding2D and `valid` instead (Keras' ResNet does the same for conv1 and pool1).
KerasTensor bottleneck(const detail::BlockContext& c, const KerasTensor& input, std::int64_t width,
                       int stride, bool project_shortcut, const std::string& prefix) {
  const std::int64_t out = 4 * width;
  KerasTensor shortcut = input;
  if (project_shortcut) {
    shortcut = detail::conv_bn_act(
        c, input, {.filters = out, .strides = stride, .padding = "valid", .prefix = prefix + "_0"});
  }
  KerasTensor x = detail::conv_bn_act(c, input,
                                      {.filters = width,
                                       .activation = "relu",
                                       .prefix = prefix + "_1",
                                       .activation_suffix = "_relu"});
  if (stride == 1) {
    x = detail::conv_bn_act(c, x,
                            {.filters = width,
                             .kernel = 3,
                             .activation = "relu",
                             .prefix = prefix + "_2",
                             .activation_suffix = "_relu"});
  } else {
    x = layers::ZeroPadding2D(1, {.dtype = c.dtype, .name = prefix + "_2_pad"})(x);
    x = detail::conv_bn_act(c, x,
                            {.filters = width,
                             .kernel = 3,
                             .strides = stride,
                             .padding = "valid",
                             .activation = "relu",
                             .prefix = prefix + "_2",
                             .activation_suffix = "_relu"});
  }
  x = detail::conv_bn_act(c, x, {.filters = out, .prefix = prefix + "_3"});
  x = layers::Add({.dtype = c.dtype, .name = prefix + "_add"})({shortcut, x});
  return layers::Activation("relu", {.dtype = c.dtype, .name = prefix + "_out"})(x);
}

}  // namespace

Model resnet50(const ImageModelOptions& options) {
  detail::check_image_options("resnet50", options);
  // torchvision's BatchNorm2d defaults: eps 1e-5, momentum 0.1 (Keras momentum 0.9).
  const detail::BlockContext c{options.dtype, 0.9, 1e-5};

  auto inputs = detail::image_input(options.input_size, options.channels);
  // (batch, S, S, channels) -> (batch, S/2, S/2, 64): 7x7 stride 2, padding 3 on every side.
  KerasTensor x = layers::ZeroPadding2D(3, {.dtype = c.dtype, .name = "conv1_pad"})(inputs);
  x = detail::conv_bn_act(c, x,
                          {.filters = 64,
                           .kernel = 7,
                           .strides = 2,
                           .padding = "valid",
                           .activation = "relu",
                           .prefix = "conv1",
                           .activation_suffix = "_relu"});
  // -> (batch, S/4, S/4, 64): 3x3 stride 2 max pooling with padding 1; zero padding acts as
  // torchvision's -inf padding because the input is a relu output (>= 0).
  x = layers::ZeroPadding2D(1, {.dtype = c.dtype, .name = "pool1_pad"})(x);
  x = layers::MaxPooling2D(3, {.strides = 2, .dtype = c.dtype, .name = "pool1_pool"})(x);

  struct Stage {
    std::int64_t width;
    int blocks;
    int stride;
  };
  constexpr Stage kStages[] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < kStages[s].blocks; ++b) {
      const std::string prefix = "conv" + std::to_string(s + 2) + "_block" + std::to_string(b + 1);
      // The first block of each stage changes the channel count (and strides): projection
      // shortcut. -> (batch, S/32, S/32, 2048) after conv5.
      x = bottleneck(c, x, kStages[s].width, b == 0 ? kStages[s].stride : 1, b == 0, prefix);
    }
  }
  if (options.include_top) x = detail::classifier_head(c, x, options.classes);
  return Model(inputs, x, {.name = options.name.empty() ? std::string("resnet50") : options.name});
}

}  // namespace mixprec::applications
