// Resizing: resizes NHWC images to (height, width), as the Keras Resizing preprocessing layer.
//   (batch, H, W, C) -> (batch, height, width, C)
// Bilinear interpolation with half-pixel centers and no antialiasing (tf.image.resize
// method="bilinear"; PyTorch interpolate(align_corners=False)). Seed 002 upsamples CIFAR's 32x32
// images to EfficientNet's 224x224 this way. Like Keras' preprocessing layers it also takes
// integer images (uint8 pixels): they are converted to the compute dtype (values kept, not
// scaled). The output dtype is the compute dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct ResizingOptions {
  std::string interpolation = "bilinear";  // the only method; others are a ValueError
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Resizing : public Layer {
 public:
  // height, width >= 1 (ValueError otherwise).
  Resizing(std::int64_t height, std::int64_t width, ResizingOptions options = {});
  std::int64_t height() const;
  std::int64_t width() const;
  const std::string& interpolation() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
