// LayerNormalization over the last axis (Keras semantics, axis = -1):
//   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta
// with the mean and the biased variance of each row (one position of the leading axes) over the
// C features, computed in float32 (mixprec::layer_norm, mixprec/transformer_ops.h). Variables, of
// shape (C,): "gamma" (ones; only with `scale`) and "beta" (zeros; only with `center`), both
// trainable and float32 under every 16-bit policy, mixed or pure (float64 under float64): the
// float32 island of DESIGN §2.3. They are not read in the compute dtype: x goes to the op in the
// compute dtype, gamma and beta in float32, and y comes back in the compute dtype.
// Only trailing-axis normalization is supported: axis = -1 or rank - 1 (ValueError otherwise).
#pragma once

#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct LayerNormalizationOptions {
  int axis = -1;          // the normalized axis: the last (-1 or rank - 1)
  double epsilon = 1e-3;  // > 0 (Keras' default)
  bool center = true;     // learn beta
  bool scale = true;      // learn gamma
  initializers::Initializer beta_initializer = "zeros";
  initializers::Initializer gamma_initializer = "ones";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class LayerNormalization : public Layer {
 public:
  // Throws ValueError for epsilon <= 0.
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  // A handle to an existing LayerNormalization (ValueError when `layer` is not one).
  explicit LayerNormalization(const Layer& layer);

  int axis() const;
  double epsilon() const;
  bool center() const;
  bool scale() const;
  // The variables once built (ValueError before); undefined without scale / center.
  Tensor gamma() const;
  Tensor beta() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
