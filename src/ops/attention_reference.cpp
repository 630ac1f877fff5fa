// The composition of attention from public ops (the oracle of the fused kernels, and what runs
// where a device has none or MIXPREC_FUSION=0). Everything in C = float32 (float64 for float64):
//   s = (q k^T) * scale                                   (B, H, Tq, Tk)
//   p = where(allowed, softmax(where(allowed, s, lowest)), 0)
//   p = dropout(p)                                        (training)
//   out = cast(permute(p v), q's dtype)                   (B, Tq, H, Dv)
// Masked scores take the lowest finite value rather than -inf, so a fully masked row is a finite
// uniform softmax (no NaN in the forward or in softmax's backward) that the second where turns
// into zeros; in a row with a visible key exp(lowest - max) is exactly 0.
#include <limits>

#include "core/counter_hash.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/attention.h"
#include "ops/dropout.h"

namespace mixprec::ops {

namespace {

// (Tq, Tk) bool: key j visible to query i when j <= i + (Tk - Tq).
Tensor causal_mask(std::int64_t q_len, std::int64_t k_len, Device device) {
  const TensorOptions f{.dtype = DType::float64, .device = device};
  const Tensor j = reshape(arange(0.0, static_cast<double>(k_len), 1.0, f), Shape({1, k_len}));
  const Tensor i = reshape(arange(static_cast<double>(k_len - q_len),
                                  static_cast<double>(k_len - q_len + q_len), 1.0, f),
                           Shape({q_len, 1}));
  return less_equal(j, i);
}

}  // namespace

namespace {

DType compute_dtype(const Tensor& q) {
  return q.dtype() == DType::float64 ? DType::float64 : DType::float32;
}

Tensor widen(const Tensor& t, DType cdt) { return t.dtype() == cdt ? t : cast(t, cdt); }

}  // namespace

Tensor attention_probabilities(const Tensor& q, const Tensor& k, const AttentionCall& c) {
  const DType cdt = compute_dtype(q);
  const Tensor qp = permute(widen(q, cdt), {0, 2, 1, 3});                  // (B, H, Tq, D)
  const Tensor kp = permute(widen(k, cdt), {0, 2, 1, 3});                  // (B, H, Tk, D)
  Tensor s = mul(matmul(qp, kp, Transpose::no, Transpose::yes), c.scale);  // (B, H, Tq, Tk)

  // The visible entries: the causal rule and the user's mask, (B | 1, H | 1, Tq, Tk).
  Tensor allowed;
  if (c.causal) allowed = causal_mask(c.q_len, c.k_len, q.device());
  if (c.mask.defined()) {
    if (allowed.defined()) {
      const TensorOptions f{.dtype = DType::float32, .device = q.device()};
      allowed =
          greater(where(allowed, cast(c.mask, DType::float32), zeros({}, f)), full({}, 0.5, f));
    } else {
      allowed = c.mask;
    }
  }
  Tensor p;
  if (allowed.defined()) {
    const TensorOptions o{.dtype = cdt, .device = q.device()};
    const double lowest = cdt == DType::float64 ? std::numeric_limits<double>::lowest()
                                                : std::numeric_limits<float>::lowest();
    p = softmax(where(allowed, s, full({}, lowest, o)), -1);
    p = where(allowed, p, zeros({}, o));
  } else {
    p = softmax(s, -1);
  }
  return p;
}

Tensor attention_composition(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionCall& c) {
  Tensor p = attention_probabilities(q, k, c);                          // (B, H, Tq, Tk)
  const Tensor vp = permute(widen(v, compute_dtype(q)), {0, 2, 1, 3});  // (B, H, Tk, Dv)
  if (c.dropout) {
    p = dropout(p, DropoutMask{.base = c.dropout_base,
                               .threshold = core::keep_threshold(c.dropout_rate),
                               .keep_scale = 1.0 / (1.0 - c.dropout_rate)});
  }
  Tensor out = permute(matmul(p, vp), {0, 2, 1, 3});  // (B, Tq, H, Dv)
  return out.dtype() == q.dtype() ? out : cast(out, q.dtype());
}

}  // namespace mixprec::ops
