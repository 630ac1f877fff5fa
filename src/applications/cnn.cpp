// applications::cnn: the small Fashion-MNIST CNN (see include/mixprec/applications.h).
#include <optional>
#include <string>

#include "applications/blocks.h"
#include "mixprec/applications.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/flatten.h"

namespace mixprec::applications {

Model cnn(const CnnOptions& options) {
  const std::string model = "cnn";
  detail::check_at_least(model, "input_size", options.input_size, 4);
  detail::check_at_least(model, "channels", options.channels, 1);
  detail::check_at_least(model, "classes", options.classes, 2);
  // BatchNormalization momentum 0.9 (PyTorch's 0.1) rather than Keras' 0.99: a 5-epoch run has
  // ~1,200 steps, and with 0.99 the moving variance still carries ~10% of its initial 1 after the
  // first epoch (235 steps at batch 256), which makes inference-mode accuracy collapse early on.
  const detail::BlockContext c{options.dtype, 0.9, 1e-3};

  auto inputs = detail::image_input(options.input_size, options.channels);
  KerasTensor x = inputs;
  // Two stages of two 3x3 convolutions; each halves the resolution:
  // (batch, 28, 28, 1) -> (batch, 14, 14, 32) -> (batch, 7, 7, 64). BatchNormalization follows
  // every convolution (so they have no bias) and makes 5 epochs of Adam enough.
  int index = 0;
  for (const std::int64_t filters : {32, 64}) {
    for (int i = 0; i < 2; ++i) {
      const std::string prefix = "conv" + std::to_string(++index);
      x = detail::conv_bn_act(c, x,
                              {.filters = filters,
                               .kernel = 3,
                               .activation = "relu",
                               .prefix = prefix,
                               .activation_suffix = "_relu"});
    }
    x = layers::MaxPooling2D(2, {.dtype = c.dtype, .name = "pool" + std::to_string(index / 2)})(x);
  }
  x = layers::Flatten({.dtype = c.dtype, .name = "flatten"})(x);
  x = layers::Dense(128, {.activation = "relu", .dtype = c.dtype, .name = "dense_1"})(x);
  x = layers::Dropout(0.3, {.seed = std::nullopt, .dtype = c.dtype, .name = "dropout"})(x);
  x = layers::Dense(options.classes,
                    {.activation = "", .dtype = c.dtype, .name = "dense_logits"})(x);
  auto outputs = layers::Activation(
      "softmax", {.dtype = mixed_precision::Policy("float32"), .name = "predictions"})(x);
  return Model(inputs, outputs, {.name = options.name});
}

}  // namespace mixprec::applications
