// Model zoo (keras.applications): ready-made models built from the public layers.
//
//   auto model = mp::applications::mlp({.units = 4096});   // seed 001's 784-4096-4096-10 model
//   auto cnn = mp::applications::cnn();                    // Fashion-MNIST CNN, (28, 28, 1) input
//   auto b0 = mp::applications::efficientnet(0, {.classes = 100});   // seed 002
//   auto r50 = mp::applications::resnet50();                         // torchvision ResNet-50
//
// Every model ends in a float32 softmax named "predictions" (the seed's "CORRECT" model) and
// builds (so initialises, from mixprec::default_generator(): set_seed() first for repeatable
// weights) under the policy given in `dtype` (default: the global policy at construction).
//
// mlp() is the model of seed 001 (the TensorFlow mixed-precision guide):
//   Input((input_features,), name "digits")
//   -> Dense(units, activation) x hidden_layers          "dense_1", "dense_2", ...
//   -> Dense(classes)                                    "dense_logits" (logits, compute dtype)
//   -> Activation("softmax", dtype float32)              "predictions"  (float32 probabilities)
// The softmax runs in float32 whatever the policy, so the model output is float32 (the seed's
// "CORRECT" model), and the loss is "sparse_categorical_crossentropy" on probabilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/applications/generate.h"
#include "mixprec/applications/gpt.h"
#include "mixprec/applications/gpt2_weights.h"
#include "mixprec/applications/vit.h"
#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::applications {

struct MlpOptions {
  std::int64_t units = 512;           // width of each hidden layer, > 0
  int hidden_layers = 2;              // >= 0; 0 gives a linear softmax classifier
  std::int64_t input_features = 784;  // > 0 (28 * 28 for Fashion-MNIST)
  std::int64_t classes = 10;          // >= 2
  std::string activation = "relu";    // hidden-layer activation, by name (activations.h)
  // Policy of the hidden and logits layers; default: the global policy at construction. The
  // output softmax is float32 regardless.
  std::optional<mixed_precision::Policy> dtype;
  std::string name = "mlp";
};

// Builds (and so initialises, from mixprec::default_generator(): set_seed() first for repeatable
// weights) the seed 001 multilayer perceptron. Throws ValueError for a non-positive size, fewer
// than two classes, or an unknown activation (naming the valid ones).
Model mlp(const MlpOptions& options = {});

// The number of multiply-adds of one sample's forward pass through mlp(options)'s Dense kernels
// (input_features * units + (hidden_layers - 1) * units^2 + units * classes); a training step
// costs about 6 * batch * this in floating-point operations (forward 2, backward 4).
std::int64_t mlp_kernel_elements(const MlpOptions& options);

// ---- convolutional networks (NHWC images; inputs are floats, e.g. pixels / 255) ----

// cnn(): a small CNN for 28x28 grayscale images (Fashion-MNIST reaches >= 0.91 test accuracy in 5
// epochs of Adam, batch 256, under float32, mixed_float16 and mixed_bfloat16):
//   Input((input_size, input_size, channels), name "images")
//   -> [Conv2D(32, 3, same, no bias) -> BatchNormalization -> relu] x 2 -> MaxPooling2D(2)
//   -> [Conv2D(64, 3, same, no bias) -> BatchNormalization -> relu] x 2 -> MaxPooling2D(2)
//   -> Flatten -> Dense(128, relu) -> Dropout(0.3) -> Dense(classes) "dense_logits"
//   -> Activation("softmax", dtype float32) "predictions"
// BatchNormalization uses momentum 0.9 (not Keras' 0.99) so that its moving statistics are
// usable after a few hundred steps.
struct CnnOptions {
  std::int64_t input_size = 28;  // square images, >= 4
  std::int64_t channels = 1;     // >= 1
  std::int64_t classes = 10;     // >= 2
  std::optional<mixed_precision::Policy> dtype;
  std::string name = "cnn";
};
// Throws ValueError for sizes out of range.
Model cnn(const CnnOptions& options = {});

// Options of the ImageNet-style models. input_size is used as given (square images; >= 32);
// EfficientNet's native resolution per variant is efficientnet_default_input_size().
struct ImageModelOptions {
  std::int64_t input_size = 224;
  std::int64_t channels = 3;    // >= 1
  std::int64_t classes = 1000;  // >= 2 with include_top
  // With include_top = false the model ends at the last feature map (batch, h, w, C), without
  // pooling (Keras' include_top=False, pooling=None), for a new head on a (frozen) base: seed
  // 000. With include_top: GlobalAveragePooling2D "avg_pool" -> Dense(classes) "dense_logits" ->
  // Activation("softmax", dtype float32) "predictions".
  bool include_top = true;
  std::optional<mixed_precision::Policy> dtype;
  std::string name;  // default: "efficientnet-b<variant>", "resnet50"
};

// EfficientNet-B<variant> (variant 0..7; ValueError otherwise), seed 002's network:
//   stem: Conv2D(32, 3, stride 2, same) -> BatchNormalization -> relu6
//   7 stages of inverted residual blocks (MBConv); base (filters, kernel, repeats, stride,
//   expansion): (16, 3, 1, 1, 1), (24, 3, 2, 2, 6), (40, 5, 2, 2, 6), (80, 3, 3, 2, 6),
//   (112, 5, 3, 1, 6), (192, 5, 4, 2, 6), (320, 3, 1, 1, 6). Each block:
//     expand:   Conv2D(in * expansion, 1) -> BatchNormalization -> relu6 (also at expansion 1,
//               as the seed does; Keras drops it there)
//     depthwise: DepthwiseConv2D(kernel, stride, same) -> BatchNormalization -> relu6
//     squeeze-and-excitation on the expanded channels E: GlobalAveragePooling2D -> Reshape
//       (1, 1, E) -> Conv2D(E / r, 1) relu6 -> Conv2D(E, 1) sigmoid -> Multiply with the
//       features, r = 24 when it divides E, else 4
//     project:  Conv2D(out, 1) -> BatchNormalization (linear)
//     + the block input when stride is 1 and in == out
//   top: Conv2D(1280, 1) -> BatchNormalization -> relu6
// Every convolution has a bias (as in the seed); BatchNormalization uses Keras defaults. Layer
// names follow keras.applications ("stem_conv", "block2a_dwconv", "block2a_se_reduce",
// "block6d_project_bn", "top_conv", ...).
// Compound scaling (the EfficientNet paper and keras.applications): filters of every convolution
// (stem, blocks, top) are multiplied by the width coefficient and rounded to a multiple of 8
// (never down by more than 10%), repeats by the depth coefficient rounded up:
//   variant  width  depth  resolution
//     0      1.0    1.0    224
//     1      1.0    1.1    240
//     2      1.1    1.2    260
//     3      1.2    1.4    300
//     4      1.4    1.8    380
//     5      1.6    2.2    456
//     6      1.8    2.6    528
//     7      2.0    3.1    600
// (Seed 002's table has the same numbers but passes them as (depth, width), and it scales
// neither the stem, the top nor the first stage: we follow the paper. For B0, the variant the
// seed trains, all of them agree.) The resolution is not applied automatically: input_size is
// used as given.
Model efficientnet(int variant, const ImageModelOptions& options = {});

struct EfficientNetCoefficients {
  double width;
  double depth;
  std::int64_t resolution;  // the paper's input size
};
// The table above; ValueError for a variant outside 0..7.
EfficientNetCoefficients efficientnet_coefficients(int variant);
inline std::int64_t efficientnet_default_input_size(int variant) {
  return efficientnet_coefficients(variant).resolution;
}

// ResNet-50 v1.5, layer for layer torchvision's resnet50 (so, with 1000 classes, 25,557,032
// trainable parameters; count_params() adds the 53,120 non-trainable BatchNormalization moving
// statistics, which torchvision keeps as buffers):
//   conv1: ZeroPadding2D(3) -> Conv2D(64, 7, stride 2, no bias) -> BatchNormalization -> relu
//   pool1: ZeroPadding2D(1) -> MaxPooling2D(3, stride 2)  (zeros are safe after relu)
//   conv2..conv5: 3, 4, 6, 3 bottleneck blocks of width 64, 128, 256, 512 (output 4x that):
//     1x1 conv -> BN -> relu -> 3x3 conv (the stage's stride 1, 2, 2, 2 on the first block:
//     the v1.5 placement, with explicit symmetric padding as torchvision) -> BN -> relu ->
//     1x1 conv (4 x width) -> BN, plus the shortcut (1x1 conv with the stride -> BN on the
//     first block of each stage, else identity) -> Add -> relu
// Convolutions have no bias; BatchNormalization uses torchvision's epsilon 1e-5 and momentum
// 0.1 (Keras momentum 0.9). Layer names follow keras.applications ("conv1_conv",
// "conv3_block1_2_conv", "conv5_block3_out", ...).
Model resnet50(const ImageModelOptions& options = {});

}  // namespace mixprec::applications

#pragma GCC visibility pop
