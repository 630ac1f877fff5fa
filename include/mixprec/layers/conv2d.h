// Conv2D: y = activation(conv(x, K) + b) in NHWC (Keras channels_last).
//   x (batch, H, W, Cin) -> y (batch, OH, OW, filters)
//   K (KH, KW, Cin / groups, filters) glorot_uniform, b (filters,) zeros, as Keras stores them.
// `same` padding gives OH = ceil(H / stride); `valid` gives OH = floor((H - window) / stride) + 1
// with window = dilation * (KH - 1) + 1 (nn_ops.h). Under a mixed policy K and b are float32
// variables read in float16/bfloat16; the convolution accumulates in float32 unless
// mixed_precision::fp16_conv_use_fp32_compute() is off, then in the 16-bit compute dtype (DESIGN
// §2.4, seed 004's TF_FP16_CONV_USE_FP32_COMPUTE).
//
//   auto y = mp::layers::Conv2D(32, 3, {.padding = "same", .activation = "relu"})(x);
//   auto z = mp::layers::Conv2D(64, {3, 5}, {.strides = 2, .groups = 2})(y);
//
// This header also defines the spatial-argument types shared by the convolution and pooling
// layers (Size2d, PaddingMode).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"
#include "mixprec/nn_ops.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

// A (height, width) pair, written as one int for both axes (`3`) or as `{3, 5}`, as Keras takes
// kernel_size/strides/dilation_rate/pool_size. Values are checked by the layer (>= 1).
struct Size2d {
  int height = 1;
  int width = 1;
  Size2d(int both) : height(both), width(both) {}  // NOLINT: implicit, `.strides = 2`
  Size2d(int h, int w) : height(h), width(w) {}
  bool operator==(const Size2d&) const = default;
  std::string to_string() const;  // "(3, 5)"
};

// Keras padding by name ("valid", "same"; any case) or mixprec::Padding. Any other name throws
// ValueError listing the valid ones.
class PaddingMode {
 public:
  PaddingMode(Padding mode) : mode_(mode) {}  // NOLINT: implicit, `.padding = mp::Padding::same`
  PaddingMode(std::string_view name);         // NOLINT: implicit, `.padding = "same"`
  PaddingMode(const char* name) : PaddingMode(std::string_view(name)) {}         // NOLINT
  PaddingMode(const std::string& name) : PaddingMode(std::string_view(name)) {}  // NOLINT
  Padding value() const { return mode_; }
  std::string_view name() const;  // "valid" or "same"
  bool operator==(const PaddingMode&) const = default;

 private:
  Padding mode_;
};

struct Conv2DOptions {
  Size2d strides = 1;  // >= 1
  PaddingMode padding = Padding::valid;
  Size2d dilation_rate = 1;  // >= 1
  int groups = 1;            // >= 1; input channels and filters both divisible by it
  std::string activation;    // by name (see activations.h); "" = linear
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Conv2D : public Layer {
 public:
  // Throws ValueError for non-positive filters, kernel size, strides, dilation or groups, filters
  // not divisible by groups, or an unknown activation.
  Conv2D(std::int64_t filters, Size2d kernel_size, Conv2DOptions options = {});
  // A handle to an existing Conv2D (throws ValueError when `layer` is not a Conv2D).
  explicit Conv2D(const Layer& layer);

  std::int64_t filters() const;
  Size2d kernel_size() const;
  Size2d strides() const;
  PaddingMode padding() const;
  Size2d dilation_rate() const;
  int groups() const;
  const std::string& activation() const;
  bool use_bias() const;
  // The variables (float32 under mixed policies); they exist once the layer is built: kernel()
  // before that throws ValueError. bias() is undefined when use_bias is false.
  Tensor kernel() const;
  Tensor bias() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
