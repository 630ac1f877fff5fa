// MultiHeadAttention (Keras semantics): query (B, Tq, Cq), value (B, Tv, Cv), key (B, Tv, Ck)
// (default: value) -> (B, Tq, output_shape or Cq).
//
//   q = query W_q + b_q   W_q "query/kernel" (Cq, H, key_dim), b_q "query/bias" (H, key_dim)
//   k = key W_k + b_k     "key/kernel" (Ck, H, key_dim), "key/bias" (H, key_dim)
//   v = value W_v + b_v   "value/kernel" (Cv, H, value_dim), "value/bias" (H, value_dim)
//   o = scaled_dot_product_attention(q, k, v, scale 1 / sqrt(key_dim), masks, dropout)
//   out = o W_o + b_o     "attention_output/kernel" (H, value_dim, out), "attention_output/bias"
//                         (out)
// as Keras' EinsumDense sublayers name and shape them (variables "<layer>/query/kernel", ...,
// created in Keras' order). Under a mixed policy the float32 kernels are read in the compute dtype
// inside each projection; the attention's softmax runs in float32 (mixprec/attention.h).
//
// Masks: attention_mask bool (B, Tq, Tv), true = attend; use_causal_mask: query i sees key j <= i
// (Keras' lower triangle, aligned top-left when Tq != Tv). A query that sees no key gets zeros
// before the output projection (Keras: the uniform average of the values) — the op's choice.
// Dropout (rate `dropout`) applies to the attention probabilities in training, its key drawn per
// call from the layer's generator (seeded by `seed`) or default_generator().
//
// Calls: eager, `mha(query, value, {.key = k, .attention_mask = m, .use_causal_mask = true,
// .training = true})`; functional, `mha(q_in, v_in, {.key = k_in, .attention_mask = m_in,
// .use_causal_mask = true})` with KerasTensors. Keras' return_attention_scores=True is the eager
// `mha.call_with_scores(query, value, args)`: the same output and the attention scores
// (B, H, Tq, Tv), the float32 softmax probabilities before dropout (mixprec/attention.h's
// attention_scores; they cost O(Tq * Tv) memory, which the output alone never does). The generic
// list forms take [query, value (, key) (, attention_mask)] (the mask recognised by its bool
// dtype). Only rank-3 inputs (Keras' default attention axis); other ranks are a ShapeError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct MultiHeadAttentionOptions {
  std::optional<std::int64_t> value_dim;  // default: key_dim
  double dropout = 0.0;                   // on the attention probabilities, in [0, 1)
  bool use_bias = true;
  std::optional<std::int64_t> output_shape;  // the output's last axis; default: the query's
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  std::optional<std::uint64_t> seed;  // the dropout generator's seed
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

// The optional arguments of an eager call.
struct AttentionArgs {
  Tensor key;             // undefined: the value
  Tensor attention_mask;  // bool (B, Tq, Tv), or undefined
  bool use_causal_mask = false;
  bool training = false;
};

// The optional arguments of a symbolic call (functional API). A layer records one
// use_causal_mask for all its symbolic calls (and its config); a different value in a later
// symbolic call is a ValueError.
struct SymbolicAttentionArgs {
  KerasTensor key;             // undefined: the value
  KerasTensor attention_mask;  // bool (B, Tq, Tv), or undefined
  bool use_causal_mask = false;
};

// What call_with_scores returns.
struct AttentionWithScores {
  Tensor output;  // (B, Tq, output_shape or Cq), as operator() returns it
  Tensor scores;  // (B, H, Tq, Tv) float32 (float64 under a float64 policy), before dropout
};

class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(std::int64_t num_heads, std::int64_t key_dim,
                     MultiHeadAttentionOptions options = {});
  // A handle to an existing MultiHeadAttention (ValueError when `layer` is another class).
  explicit MultiHeadAttention(const Layer& layer);

  Tensor operator()(const Tensor& query, const Tensor& value, const AttentionArgs& args = {}) const;
  KerasTensor operator()(const KerasTensor& query, const KerasTensor& value,
                         const SymbolicAttentionArgs& args = {}) const;
  using Layer::operator();
  // The eager call that also returns the attention scores (Keras' return_attention_scores).
  AttentionWithScores call_with_scores(const Tensor& query, const Tensor& value,
                                       const AttentionArgs& args = {}) const;

  std::int64_t num_heads() const;
  std::int64_t key_dim() const;
  std::int64_t value_dim() const;
  bool use_causal_mask() const;  // the symbolic calls' setting
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
