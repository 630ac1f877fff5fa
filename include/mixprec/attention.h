// Scaled dot-product attention: softmax(q k^T * scale + mask) v over the heads of a multi-head
// layer, differentiable in q, k and v.
//
// Layout: the one a Dense projection reshaped gives, with no transposes:
//   q (B, Tq, H, D), k (B, Tk, H, D), v (B, Tk, H, Dv)  ->  out (B, Tq, H, Dv) in q's dtype.
// q, k and v share one floating dtype and one device; B, H and Tk must agree (ShapeError naming
// the three shapes otherwise). Tq != Tk is allowed (a key-value cache: Tq new queries over Tk
// cached keys).
//
// Numerics (the float32 island of DESIGN §2.3): for float32, float16 and bfloat16 inputs the
// scores, the softmax, its sums and the probability-weighted sums are computed in float32 and the
// output rounded once to q's dtype; float64 computes in float64.
//
// Masks: query i of a row sees key j when every mask given allows it:
//  - `causal`: j <= i + (Tk - Tq), the bottom-right alignment (the last query sees every key, as
//    a decoder step over a key-value cache needs; with Tq == Tk the usual lower triangle);
//  - `mask`: bool, true = attend (Keras' attention_mask), broadcastable to (B, H, Tq, Tk) or
//    given as (B, Tq, Tk) (applied to every head).
// A query that sees no key at all (a fully masked row) gets an output of zeros and no gradient
// (Keras' softmax with a large negative bias would give the uniform average of v instead; zeros
// keep padded positions out of every sum and match flash-attention kernels).
//
// Dropout (training only): the probabilities are multiplied by a counter-based keep mask
// (core/counter_hash.h) scaled by 1 / (1 - rate), element (b, h, i, j) decided by
// counter_keeps(seed, ((b * H + h) * Tq + i) * Tk + j, ceil(rate * 2^53)): the Dropout op's rule
// applied to the (B, H, Tq, Tk) probabilities, so the fused kernel and the reference drop the same
// elements, and the backward regenerates the mask instead of storing it.
//
// Two implementations with one contract:
//  - attention_reference: the composition of public ops (permute, matmul, where, softmax, dropout,
//    matmul) in float32 (float64 for float64), memory O(Tq * Tk); the oracle of the tests;
//  - scaled_dot_product_attention: a fused kernel where the device has one (the CPU and CUDA:
//    flash-attention style, memory O(Tq + Tk) per head, the Tq x Tk probabilities never stored),
//    the reference elsewhere and when MIXPREC_FUSION=0.
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct AttentionOptions {
  // Multiplies q k^T; nullopt: 1 / sqrt(D).
  std::optional<double> scale;
  // Bottom-right aligned causal mask (see above).
  bool causal = false;
  // bool (B | 1, H | 1, Tq | 1, Tk | 1) or (B | 1, Tq | 1, Tk | 1), true = attend; undefined for
  // none. On q's device.
  Tensor mask;
  // Fraction of probabilities dropped in training, in [0, 1) (ValueError otherwise).
  double dropout_rate = 0.0;
  bool training = false;
  // The dropout key of this call; nullopt draws one from default_generator(). A layer draws one
  // per call from its own generator.
  std::optional<std::uint64_t> seed;
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// The composition (the oracle), same contract and results within float32 rounding.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionOptions& options = {});

// The attention scores: the softmax probabilities (B, H, Tq, Tk) of q against k under the same
// scale and masks (the entries a query may not see 0, a fully masked row all 0), before dropout
// (options.dropout_rate and training are ignored), in float32 (float64 for float64 inputs);
// Keras' return_attention_scores. Memory O(Tq * Tk): for inspecting attention, not for training
// long sequences. Differentiable in q and k. The same checks as scaled_dot_product_attention with
// v = k.
Tensor attention_scores(const Tensor& q, const Tensor& k, const AttentionOptions& options = {});
// Whether scaled_dot_product_attention takes a fused kernel where one exists: the override if set
// (tests compare both), else MIXPREC_FUSION (0 turns it off; on by default).
bool attention_fusion_enabled();
void set_attention_fusion(std::optional<bool> enabled);

}  // namespace mixprec

#pragma GCC visibility pop
