// applications::vit: a Vision Transformer classifier (see include/mixprec/applications/vit.h).
#include "mixprec/applications/vit.h"

#include <string>

#include "mixprec/error.h"
#include "mixprec/layers/activation.h"
#include "mixprec/layers/class_token.h"
#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/cropping1d.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/layer_normalization.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/multi_head_attention.h"
#include "mixprec/layers/pooling.h"
#include "mixprec/layers/position_embedding.h"
#include "mixprec/layers/reshape.h"

namespace mixprec::applications {

namespace {

void validate(const VitConfig& c) {
  auto at_least = [](const char* field, std::int64_t value, std::int64_t minimum) {
    if (value < minimum) {
      throw ValueError("applications::vit: " + std::string(field) +
                       " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
    }
  };
  at_least("image_size", c.image_size, 1);
  at_least("channels", c.channels, 1);
  at_least("patch_size", c.patch_size, 1);
  at_least("width", c.width, 1);
  at_least("layers", c.layers, 1);
  at_least("heads", c.heads, 1);
  at_least("mlp_dim", c.mlp_dim, 1);
  at_least("classes", c.classes, 2);
  if (c.image_size % c.patch_size != 0) {
    throw ValueError("applications::vit: image_size (" + std::to_string(c.image_size) +
                     ") must be a multiple of patch_size (" + std::to_string(c.patch_size) + ")");
  }
  if (c.width % c.heads != 0) {
    throw ValueError("applications::vit: width (" + std::to_string(c.width) +
                     ") must be a multiple of heads (" + std::to_string(c.heads) + ")");
  }
  if (c.pooling != "mean" && c.pooling != "token") {
    throw ValueError("applications::vit: pooling must be \"mean\" or \"token\", got \"" +
                     c.pooling + "\"");
  }
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    throw ValueError("applications::vit: dropout must be in [0, 1), got " +
                     std::to_string(c.dropout));
  }
}

layers::DenseOptions dense(const VitConfig& c, const std::string& name, const char* activation) {
  layers::DenseOptions o;
  o.activation = activation;
  o.dtype = c.dtype;
  o.name = name;
  return o;
}

std::string block_name(int i, const char* part) {
  return "block_" + std::to_string(i) + "_" + part;
}

}  // namespace

Model vit(const VitConfig& c) {
  validate(c);
  const std::int64_t side = c.image_size / c.patch_size;
  const std::int64_t patch_tokens = side * side;
  const bool class_token = c.pooling == "token";
  const std::int64_t tokens = patch_tokens + (class_token ? 1 : 0);
  auto images = Input({c.image_size, c.image_size, c.channels}, {.name = "images"});
  // Non-overlapping patches, each projected to width features: (B, side, side, width).
  layers::Conv2DOptions patches;
  patches.strides = static_cast<int>(c.patch_size);
  patches.dtype = c.dtype;
  patches.name = "patch_embedding";
  KerasTensor x = layers::Conv2D(c.width, static_cast<int>(c.patch_size), patches)(images);
  x = layers::Reshape({patch_tokens, c.width}, {.dtype = c.dtype, .name = "patches"})(x);
  if (class_token) x = layers::ClassToken({.dtype = c.dtype, .name = "class_token"})(x);
  KerasTensor positions =
      layers::PositionEmbedding(tokens, {.initializer = initializers::random_normal(0.0, 0.02),
                                         .dtype = c.dtype,
                                         .name = "position_embedding"})(x);
  x = layers::Add({.dtype = c.dtype, .name = "embeddings_add"})({x, positions});
  for (int i = 0; i < c.layers; ++i) {
    KerasTensor h = layers::LayerNormalization(
        {.epsilon = c.layer_norm_epsilon, .dtype = c.dtype, .name = block_name(i, "ln_1")})(x);
    layers::MultiHeadAttentionOptions mha;
    mha.dropout = c.dropout;
    mha.dtype = c.dtype;
    mha.name = block_name(i, "attention");
    h = layers::MultiHeadAttention(c.heads, c.width / c.heads, mha)(h, h);
    x = layers::Add({.dtype = c.dtype, .name = block_name(i, "add_1")})({x, h});
    h = layers::LayerNormalization(
        {.epsilon = c.layer_norm_epsilon, .dtype = c.dtype, .name = block_name(i, "ln_2")})(x);
    h = layers::Dense(c.mlp_dim, dense(c, block_name(i, "fc"), "gelu"))(h);
    h = layers::Dense(c.width, dense(c, block_name(i, "proj"), ""))(h);
    if (c.dropout > 0.0) {
      layers::DropoutOptions d;
      d.dtype = c.dtype;
      d.name = block_name(i, "dropout");
      h = layers::Dropout(c.dropout, d)(h);
    }
    x = layers::Add({.dtype = c.dtype, .name = block_name(i, "add_2")})({x, h});
  }
  x = layers::LayerNormalization(
      {.epsilon = c.layer_norm_epsilon, .dtype = c.dtype, .name = "ln_f"})(x);
  if (class_token) {
    // Row 0, the class token's: (B, N + 1, width) -> (B, 1, width) -> (B, width).
    x = layers::Cropping1D({0, patch_tokens}, {.dtype = c.dtype, .name = "class_token_row"})(x);
    x = layers::Flatten({.dtype = c.dtype, .name = "pooled"})(x);
  } else {
    // The mean over the tokens: (B, N, width) -> (B, N, 1, width) -> (B, width).
    x = layers::Reshape({tokens, 1, c.width}, {.dtype = c.dtype, .name = "token_grid"})(x);
    x = layers::GlobalAveragePooling2D({.dtype = c.dtype, .name = "token_mean"})(x);
  }
  x = layers::Dense(c.classes, dense(c, "logits", ""))(x);
  auto outputs = layers::Activation(
      "softmax", {.dtype = mixed_precision::Policy("float32"), .name = "predictions"})(x);
  return Model(images, outputs, {.name = c.name});
}

}  // namespace mixprec::applications
