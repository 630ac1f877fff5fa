// applications::efficientnet: seed 002's EfficientNet with the paper's compound scaling (see
// include/mixprec/applications.h for the structure and the table).
#include <cmath>
#include <string>
#include <vector>

#include "applications/blocks.h"
#include "mixprec/applications.h"
#include "mixprec/error.h"
#include "mixprec/layers/depthwise_conv2d.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/reshape.h"

namespace mixprec::applications {

namespace {

// One stage of B0 (the paper's Table 1 rows 2..8).
struct StageArgs {
  std::int64_t filters;
  int kernel;
  int repeats;
  int stride;
  int expansion;
};
constexpr StageArgs kStages[] = {
    {16, 3, 1, 1, 1},  {24, 3, 2, 2, 6},  {40, 5, 2, 2, 6},  {80, 3, 3, 2, 6},
    {112, 5, 3, 1, 6}, {192, 5, 4, 2, 6}, {320, 3, 1, 1, 6},
};
constexpr std::int64_t kStemFilters = 32;
constexpr std::int64_t kTopFilters = 1280;

// filters * width rounded to the nearest multiple of 8 (at least 8), bumped up by 8 when the
// rounding lost more than 10%: the paper's round_filters (also seed 002's and Keras').
std::int64_t round_filters(std::int64_t filters, double width) {
  constexpr std::int64_t kDivisor = 8;
  const double scaled = static_cast<double>(filters) * width;
  std::int64_t rounded = static_cast<std::int64_t>(scaled + kDivisor / 2.0) / kDivisor * kDivisor;
  if (rounded < kDivisor) rounded = kDivisor;
  if (static_cast<double>(rounded) < 0.9 * scaled) rounded += kDivisor;
  return rounded;
}

int round_repeats(int repeats, double depth) {
  return static_cast<int>(std::ceil(depth * repeats));
}

// Seed 002's SE_Block on the expanded features x (batch, h, w, E): a per-channel gate
// sigmoid(W2 relu6(W1 mean_hw(x))) multiplied into x. The reduction rate is 24 when it divides
// E, else 4 (the seed's rule; E is always a multiple of 8 here).
KerasTensor squeeze_excite(const detail::BlockContext& c, const KerasTensor& x,
                           const std::string& prefix) {
  const std::int64_t channels = x.shape().back();
  const std::int64_t rate = channels % 24 == 0 ? 24 : 4;
  const std::int64_t squeezed = channels / rate > 0 ? channels / rate : 1;
  KerasTensor s =
      layers::GlobalAveragePooling2D({.dtype = c.dtype, .name = prefix + "se_squeeze"})(x);
  s = layers::Reshape({1, 1, channels}, {.dtype = c.dtype, .name = prefix + "se_reshape"})(s);
  s = layers::Conv2D(
      squeezed, 1,
      {.padding = "same", .activation = "relu6", .dtype = c.dtype, .name = prefix + "se_reduce"})(
      s);
  s = layers::Conv2D(
      channels, 1,
      {.padding = "same", .activation = "sigmoid", .dtype = c.dtype, .name = prefix + "se_expand"})(
      s);
  // (batch, 1, 1, E) broadcast over (batch, h, w, E).
  return layers::Multiply({.dtype = c.dtype, .name = prefix + "se_excite"})({s, x});
}

// Seed 002's InvertResidualBlock: expand (1x1) -> depthwise (k x k, stride) -> SE -> project
// (1x1, linear) [+ input]. (batch, h, w, in) -> (batch, h / stride, w / stride, out).
KerasTensor inverted_residual(const detail::BlockContext& c, const KerasTensor& input,
                              std::int64_t out, int kernel, int stride, int expansion,
                              const std::string& prefix) {
  const std::int64_t in = input.shape().back();
  // The seed keeps the 1x1 expansion even at expansion 1 (Keras drops it there).
  KerasTensor x = detail::conv_bn_act(c, input,
                                      {.filters = in * expansion,
                                       .use_bias = true,
                                       .activation = "relu6",
                                       .prefix = prefix + "expand",
                                       .activation_suffix = "_activation"});
  layers::DepthwiseConv2DOptions dw;
  dw.strides = stride;
  dw.padding = "same";
  dw.dtype = c.dtype;
  dw.name = prefix + "dwconv";
  x = layers::DepthwiseConv2D(kernel, dw)(x);
  x = layers::BatchNormalization(detail::bn_options(c, prefix + "bn"))(x);
  x = layers::Activation("relu6", {.dtype = c.dtype, .name = prefix + "activation"})(x);
  x = squeeze_excite(c, x, prefix);
  x = detail::conv_bn_act(c, x, {.filters = out, .use_bias = true, .prefix = prefix + "project"});
  if (stride == 1 && in == out) {
    x = layers::Add({.dtype = c.dtype, .name = prefix + "add"})({x, input});
  }
  return x;
}

}  // namespace

EfficientNetCoefficients efficientnet_coefficients(int variant) {
  static constexpr EfficientNetCoefficients kTable[] = {
      {1.0, 1.0, 224}, {1.0, 1.1, 240}, {1.1, 1.2, 260}, {1.2, 1.4, 300},
      {1.4, 1.8, 380}, {1.6, 2.2, 456}, {1.8, 2.6, 528}, {2.0, 3.1, 600},
  };
  if (variant < 0 || variant > 7) {
    throw ValueError("applications::efficientnet: variant must be 0..7 (B0..B7), got " +
                     std::to_string(variant));
  }
  return kTable[variant];
}

Model efficientnet(int variant, const ImageModelOptions& options) {
  const EfficientNetCoefficients k = efficientnet_coefficients(variant);
  const std::string model = "efficientnet-b" + std::to_string(variant);
  detail::check_image_options(model, options);
  const detail::BlockContext c{options.dtype};

  auto inputs = detail::image_input(options.input_size, options.channels);
  // (batch, S, S, channels) -> (batch, S/2, S/2, 32 w)
  KerasTensor x = detail::conv_bn_act(c, inputs,
                                      {.filters = round_filters(kStemFilters, k.width),
                                       .kernel = 3,
                                       .strides = 2,
                                       .use_bias = true,
                                       .activation = "relu6",
                                       .prefix = "stem"});
  for (int stage = 0; stage < 7; ++stage) {
    const StageArgs& a = kStages[stage];
    const std::int64_t filters = round_filters(a.filters, k.width);
    const int repeats = round_repeats(a.repeats, k.depth);
    for (int r = 0; r < repeats; ++r) {
      // Keras names: block<stage from 1><a, b, c, ...>_..., e.g. "block6d_".
      const std::string prefix =
          "block" + std::to_string(stage + 1) + std::string(1, static_cast<char>('a' + r)) + "_";
      x = inverted_residual(c, x, filters, a.kernel, r == 0 ? a.stride : 1, a.expansion, prefix);
    }
  }
  // (batch, S/32, S/32, 320 w) -> (batch, S/32, S/32, 1280 w)
  x = detail::conv_bn_act(c, x,
                          {.filters = round_filters(kTopFilters, k.width),
                           .use_bias = true,
                           .activation = "relu6",
                           .prefix = "top"});
  if (options.include_top) x = detail::classifier_head(c, x, options.classes);
  return Model(inputs, x, {.name = options.name.empty() ? model : options.name});
}

}  // namespace mixprec::applications
