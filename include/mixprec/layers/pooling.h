// Pooling layers in NHWC (Keras channels_last). None has variables; the output dtype is the
// compute dtype.
//   MaxPooling2D / AveragePooling2D: (batch, H, W, C) -> (batch, OH, OW, C); strides default to
//     pool_size (Keras); `same` gives OH = ceil(H / stride), `valid` floor((H - pool) / stride)
//     + 1. Average pooling with `same` padding divides by the count of real (unpadded) elements.
//   GlobalAveragePooling2D: (batch, H, W, C) -> (batch, C), or (batch, 1, 1, C) with keepdims;
//     accumulated in float32.
//
//   x = mp::layers::MaxPooling2D(2)(x);
//   x = mp::layers::AveragePooling2D(3, {.strides = 2, .padding = "same"})(x);
//   x = mp::layers::GlobalAveragePooling2D()(x);
#pragma once

#include <optional>
#include <string>

#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct Pooling2DOptions {
  Size2d strides = 0;  // 0 (the default): equal to pool_size, as Keras' strides=None; else >= 1
  PaddingMode padding = Padding::valid;
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

// Throws ValueError for a non-positive pool size or negative strides.
class MaxPooling2D : public Layer {
 public:
  explicit MaxPooling2D(Size2d pool_size = 2, Pooling2DOptions options = {});
  Size2d pool_size() const;
  Size2d strides() const;  // the resolved strides (pool_size when left at 0)
  PaddingMode padding() const;
};

class AveragePooling2D : public Layer {
 public:
  explicit AveragePooling2D(Size2d pool_size = 2, Pooling2DOptions options = {});
  Size2d pool_size() const;
  Size2d strides() const;
  PaddingMode padding() const;
};

struct GlobalPooling2DOptions {
  bool keepdims = false;  // true: (batch, 1, 1, C)
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class GlobalAveragePooling2D : public Layer {
 public:
  explicit GlobalAveragePooling2D(GlobalPooling2DOptions options = {});
  bool keepdims() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
