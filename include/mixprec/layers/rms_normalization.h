// RMSNormalization over the last axis (Keras 3 keras.layers.RMSNormalization, axis = -1):
//   y = x / sqrt(mean(x^2) + epsilon) * scale
// with the mean of squares of each row over the C features in float32
// (mixprec::rms_norm, mixprec/transformer_ops.h). One variable, "scale" (C,) (ones, trainable),
// float32 under every 16-bit policy (float64 under float64), passed to the op in float32; y is in
// the compute dtype. Only trailing-axis normalization is supported (axis = -1 or rank - 1).
#pragma once

#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct RMSNormalizationOptions {
  int axis = -1;          // the normalized axis: the last (-1 or rank - 1)
  double epsilon = 1e-6;  // > 0 (Keras 3's default)
  initializers::Initializer scale_initializer = "ones";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class RMSNormalization : public Layer {
 public:
  // Throws ValueError for epsilon <= 0.
  explicit RMSNormalization(RMSNormalizationOptions options = {});
  // A handle to an existing RMSNormalization (ValueError when `layer` is not one).
  explicit RMSNormalization(const Layer& layer);

  int axis() const;
  double epsilon() const;
  // The variable once built (ValueError before).
  Tensor scale() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
