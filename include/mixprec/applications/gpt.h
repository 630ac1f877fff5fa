// GPT: a decoder-only Transformer language model (GPT-2's architecture) built from the public
// layers, for next-token training with fit() and for generation (applications/generate.h).
//
//   auto model = mp::applications::gpt(mp::applications::gpt_preset("gpt-nano"));
//   model.compile({.optimizer = mp::optimizers::AdamW({.learning_rate = 1e-3}),
//                  .loss = mp::losses::SparseCategoricalCrossentropy({.from_logits = true})});
//   model.fit(x, y, {.batch_size = 16});   // x, y: (N, T) int32 token ids, y = x shifted by one
//
// The graph, with the layer names that load_gpt2_huggingface(), GptDecoder and gpt_config() rely
// on:
//   Input((T,), int32, "token_ids"), T <= context (any length: the input's time axis is unknown)
//   -> ReversibleEmbedding(vocab, width)            "token_embedding"   (B, T, width)
//   + PositionEmbedding(context)                    "position_embedding", added by "embeddings_add"
//   -> Dropout(dropout)                             "embeddings_dropout" (only when dropout > 0)
//   -> per block i = 0 .. layers - 1 (pre-norm, as GPT-2):
//        h = LayerNormalization(epsilon)            "block_<i>_ln_1"
//        h = MultiHeadAttention(heads, width / heads, causal)(h, h)   "block_<i>_attention"
//        x = x + h                                  "block_<i>_add_1"
//        h = LayerNormalization(epsilon)            "block_<i>_ln_2"
//        h = Dense(4 * width, "gelu_tanh")          "block_<i>_fc"
//        h = Dense(width)                           "block_<i>_proj"
//        h = Dropout(dropout)                       "block_<i>_dropout" (only when dropout > 0)
//        x = x + h                                  "block_<i>_add_2"
//   -> LayerNormalization(epsilon)                  "ln_f"
//   -> token_embedding.reverse(x): logits (B, T, vocab) in the compute dtype (the tied head).
// The logits are the model's output; train with SparseCategoricalCrossentropy(from_logits = true),
// which computes in float32 without a float32 copy of the logits.
//
// Initialisation (GPT-2's): every kernel and both embedding tables normal(0, 0.02), the two
// projections into the residual stream (attention output, block_<i>_proj) normal(0, 0.02 /
// sqrt(2 * layers)), biases zero, LayerNormalization gamma one and beta zero; drawn from
// mixprec::default_generator() (set_seed() first for repeatable weights).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::applications {

struct GptConfig {
  int layers = 12;              // Transformer blocks, >= 1
  std::int64_t width = 768;     // the residual stream's width, a multiple of heads
  int heads = 12;               // attention heads, >= 1
  std::int64_t context = 1024;  // the longest sequence (rows of the position table)
  std::int64_t vocab = 50257;   // token ids 0 .. vocab - 1
  double dropout = 0.0;         // after the embeddings, on the attention probabilities and
                                // after each block's MLP; in [0, 1)
  double layer_norm_epsilon = 1e-5;
  // Policy of every layer; default: the global policy at construction.
  std::optional<mixed_precision::Policy> dtype;
  std::string name = "gpt";
};

// The named configurations:
//   "gpt2"      12 layers, width 768, 12 heads, context 1024, vocab 50257 (GPT-2 124M)
//   "gpt-mini"   6 layers, width 384,  6 heads, context 256,  vocab 50257
//   "gpt-micro"  4 layers, width 256,  4 heads, context 256,  vocab 257 (the byte tokenizer)
//   "gpt-nano"   3 layers, width 128,  4 heads, context 128,  vocab 257 (trains on two CPU cores
//                in minutes)
// Any other name is a ValueError listing these.
GptConfig gpt_preset(std::string_view name);
std::vector<std::string> gpt_preset_names();

// Builds (and so initialises) the model. ValueError for sizes out of range (naming the field).
Model gpt(const GptConfig& config = {});

// The configuration of a model built by gpt() (or loaded from its saved form), read back from its
// layers; ValueError naming the missing layer when `model` is not such a model.
GptConfig gpt_config(const Model& model);

// Floating-point operations of one training step of batch x seq_len tokens, as llm.c and the
// PaLM paper count them: 6 * tokens * N + 12 * tokens * layers * seq_len * width, with N the
// weights of the matrix products (12 * layers * width^2 + vocab * width).
double gpt_step_flops(const GptConfig& config, std::int64_t batch, std::int64_t seq_len);

}  // namespace mixprec::applications

#pragma GCC visibility pop
