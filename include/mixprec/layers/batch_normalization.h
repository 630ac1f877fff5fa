// BatchNormalization over the channel axis (the last; NHWC), Keras semantics:
//   y = (x - mean) / sqrt(var + epsilon) * gamma + beta
// Variables (all of shape (C,)): gamma (ones, trainable, only with `scale`), beta (zeros,
// trainable, only with `center`), moving_mean (zeros) and moving_variance (ones), the last two
// non-trainable. They are float32 under every 16-bit policy, mixed or pure (float64 under float64;
// Keras' _param_dtype does the same) and, unlike
// other layers' variables, are NOT read in the compute dtype: the normalisation takes x in the
// compute dtype and gamma/beta/statistics in float32 (DESIGN §2.3 float32 island; Keras does the
// same), and returns y in the compute dtype.
//
// Training mode (called with {.training = true} while the layer is trainable) normalises with the
// batch mean and the biased batch variance, and then updates, outside autograd,
//   moving_mean     = moving_mean * momentum + batch_mean * (1 - momentum)
//   moving_variance = moving_variance * momentum + batch_var_unbiased * (1 - momentum)
// where batch_var_unbiased = biased variance * n / (n - 1), n = the number of values per channel
// (batch * H * W): the UNBIASED variance, as TensorFlow's fused batch norm and PyTorch use for the
// moving variance (Keras' non-fused path uses the biased one; the two differ by n / (n - 1)).
// Inference mode (every other call) normalises with the moving statistics. A frozen layer
// (trainable false, directly or through a frozen model) always runs in inference mode and leaves
// its moving statistics alone, as Keras does since TF 2.0: fine-tuning a frozen base does not
// destroy what it learned.
#pragma once

#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct BatchNormalizationOptions {
  int axis = -1;           // the channel axis; only the last axis is supported (-1 or rank - 1)
  double momentum = 0.99;  // in [0, 1]; PyTorch's momentum 0.1 is Keras' 0.9
  double epsilon = 1e-3;   // > 0
  bool center = true;      // learn beta
  bool scale = true;       // learn gamma
  initializers::Initializer beta_initializer = "zeros";
  initializers::Initializer gamma_initializer = "ones";
  initializers::Initializer moving_mean_initializer = "zeros";
  initializers::Initializer moving_variance_initializer = "ones";
  // Training-mode statistics over the global batch of the process group (mixprec::distributed):
  // per-channel sums all-reduced in float32 (float64 under float64), the gradient's cross-rank
  // terms all-reduced in the backward pass, the moving statistics updated from the global mean
  // and variance (n = the rows of every rank). Keras 3's BatchNormalization(synchronized=True),
  // TF's SyncBatchNormalization. In a group of one it is the ordinary layer; inference is always
  // per rank (it uses the moving statistics). Every rank must call the layer in the same order.
  bool synchronized = false;
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class BatchNormalization : public Layer {
 public:
  // Throws ValueError for momentum outside [0, 1], epsilon <= 0, or an axis other than -1 when
  // called on an input whose last axis it does not name.
  explicit BatchNormalization(BatchNormalizationOptions options = {});
  // A handle to an existing BatchNormalization (ValueError when `layer` is not one).
  explicit BatchNormalization(const Layer& layer);

  double momentum() const;
  double epsilon() const;
  bool center() const;
  bool scale() const;
  bool synchronized() const;
  // The variables, once built (ValueError before). gamma()/beta() are undefined without
  // scale/center.
  Tensor gamma() const;
  Tensor beta() const;
  Tensor moving_mean() const;
  Tensor moving_variance() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
