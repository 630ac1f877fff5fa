// Internal helpers of the attention op (mixprec/attention.h), shared by the fused path
// (ops/attention.cpp) and the reference composition (ops/attention_reference.cpp).
#pragma once

#include <cstdint>

#include "mixprec/attention.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

// What one call resolved from its arguments: the dimensions, the scale, the mask as a bool view
// (batch, heads, q_len, k_len) (stride 0 along broadcast axes; undefined for none) and the
// dropout key (active only in training with a positive rate).
struct AttentionCall {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;
  bool causal = false;
  Tensor mask;
  bool dropout = false;
  std::uint64_t dropout_base = 0;
  double dropout_rate = 0.0;
};

// Checks q, k, v and the options (ShapeError, DTypeError, ValueError, DeviceError naming the op,
// what it received and what it expects) and resolves them; draws the dropout key from
// default_generator() when dropout is active and options.seed is unset.
AttentionCall resolve_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                const AttentionOptions& options);

// The composition of public ops on a resolved call (attention_reference's body).
Tensor attention_composition(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionCall& call);
// Its probabilities before dropout, (B, H, Tq, Tk) in float32 (float64 for float64 inputs):
// attention_scores' body.
Tensor attention_probabilities(const Tensor& q, const Tensor& k, const AttentionCall& call);

}  // namespace mixprec::ops
