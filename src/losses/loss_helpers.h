// Pieces shared by the losses: the float32 island cast, target/prediction shape matching, Keras's
// probability clipping and log-probabilities. All are compositions of differentiable ops.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::losses::detail {

// Keras backend epsilon: probabilities are clipped to [kEpsilon, 1 - kEpsilon].
inline constexpr double kEpsilon = 1e-7;

enum class FromLogits { no, yes };

// y_pred in the dtype the loss computes in: float32, or float64 for a float64 y_pred (DESIGN §2.3:
// never narrower than float32). Throws DTypeError for a non-floating y_pred.
Tensor prediction(const char* loss, const Tensor& y_pred);
// y_true cast to `pred`'s dtype and shaped like it: equal shapes, or one trailing extent-1 axis
// more or less (Keras's squeeze-or-expand). Otherwise a ShapeError naming both shapes.
Tensor target_like(const char* loss, const Tensor& y_true, const Tensor& pred);
// min(max(p, eps), 1 - eps).
Tensor clip_probabilities(const Tensor& p);
// log-probabilities over the last axis: log_softmax of logits, or log of the probabilities
// normalised to sum 1 and clipped (Keras's categorical_crossentropy on probabilities).
Tensor log_probabilities(const Tensor& pred, FromLogits from_logits);

}  // namespace mixprec::losses::detail
