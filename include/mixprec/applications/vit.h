// ViT: a Vision Transformer classifier (Dosovitskiy et al.) built from the public layers.
//
//   auto model = mp::applications::vit({.image_size = 28, .channels = 1, .classes = 10});
//   model.compile({.optimizer = mp::optimizers::AdamW(), .loss = "sparse_categorical_crossentropy",
//                  .metrics = {"accuracy"}});
//
// The graph (layer names in quotes):
//   Input((S, S, channels), "images")
//   -> Conv2D(width, patch_size, strides patch_size)   "patch_embedding" (B, S/p, S/p, width)
//   -> Reshape((N, width))                             "patches", N = (S / patch_size)^2
//   -> ClassToken (pooling "token" only)               "class_token", then N + 1 tokens
//   + PositionEmbedding(N or N + 1)                    "position_embedding", "embeddings_add"
//   -> per block i (pre-norm):
//        x = x + MultiHeadAttention(heads, width / heads)(LayerNormalization(x))
//                "block_<i>_ln_1", "block_<i>_attention", "block_<i>_add_1"
//        x = x + Dense(width)(Dense(mlp_dim, "gelu")(LayerNormalization(x)))
//                "block_<i>_ln_2", "block_<i>_fc", "block_<i>_proj", "block_<i>_add_2"
//   -> LayerNormalization                              "ln_f"
//   -> pooling "mean": the mean over the N patch tokens "token_grid", "token_mean";
//      pooling "token": the class token's row           "class_token_row" (Cropping1D), "pooled"
//   -> Dense(classes)                                  "logits"
//   -> Activation("softmax", float32)                  "predictions" (float32 probabilities)
// Like the other classifiers of the model zoo it ends in a float32 softmax, so the loss is
// "sparse_categorical_crossentropy" on probabilities. The tokens are pooled by their mean
// (pooling "mean", the default) or read from a learned class token prepended to the patches
// (pooling "token", the original ViT's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::applications {

struct VitConfig {
  std::int64_t image_size = 28;  // square images, a multiple of patch_size
  std::int64_t channels = 1;
  std::int64_t patch_size = 4;
  std::int64_t width = 64;  // a multiple of heads
  int layers = 4;
  int heads = 4;
  std::int64_t mlp_dim = 128;
  std::int64_t classes = 10;  // >= 2
  double dropout = 0.0;       // on the attention probabilities and after each MLP, in [0, 1)
  double layer_norm_epsilon = 1e-6;
  std::string pooling = "mean";  // "mean" (of the patch tokens) or "token" (a class token)
  std::optional<mixed_precision::Policy> dtype;  // default: the global policy at construction
  std::string name = "vit";
};

// Builds (and so initialises, from mixprec::default_generator()) the model. ValueError for sizes
// out of range, naming the field.
Model vit(const VitConfig& config = {});

}  // namespace mixprec::applications

#pragma GCC visibility pop
