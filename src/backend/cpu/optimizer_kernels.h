// Fused optimizer loops over float32 arrays: each update reads the gradient, the variable and its
// slots once and writes them once, in one OpenMP loop (no chain of tensor ops on the hot path of
// every training step). Every loop is elementwise, so results do not depend on the thread count.
// Also the fused unscale+check of loss scaling and a deterministic sum of squares for clipping.
#pragma once

#include <cstdint>
#include <limits>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// How an update reads its gradient: g = min(max(raw * scale, -limit), limit). clipnorm and
// global_clipnorm set `scale`, clipvalue sets `limit`; the defaults leave raw unchanged (NaN stays
// NaN: clipping never hides a non-finite gradient).
struct GradientTransform {
  float scale = 1.0f;
  float limit = std::numeric_limits<float>::infinity();
};

// Per-step constants, computed once in double and rounded to float.
struct SGDStep {
  float learning_rate = 0.0f;
  float momentum = 0.0f;  // 0: no momentum slot
  bool nesterov = false;
};
// momentum may be null when step.momentum == 0.
void sgd_update(float* var, const float* grad, float* momentum, std::int64_t n,
                GradientTransform transform, const SGDStep& step);

struct AdamStep {
  float alpha = 0.0f;  // lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  float one_minus_beta_1 = 0.0f;
  float one_minus_beta_2 = 0.0f;
  float epsilon = 0.0f;
  float decay = 0.0f;  // AdamW: weight_decay * lr (0 for Adam)
};
void adam_update(float* var, const float* grad, float* m, float* v, std::int64_t n,
                 GradientTransform transform, const AdamStep& step);

struct RMSpropStep {
  float learning_rate = 0.0f;
  float rho = 0.0f;
  float momentum = 0.0f;
  float epsilon = 0.0f;
};
// momentum is null unless step.momentum > 0; average_gradient is null unless centered.
void rmsprop_update(float* var, const float* grad, float* velocity, float* momentum,
                    float* average_gradient, std::int64_t n, GradientTransform transform,
                    const RMSpropStep& step);

// sum(x[i]^2) in double. Partial sums over fixed blocks are combined in block order, so the result
// is the same for every thread count (clipping must not make runs irreproducible).
double sum_of_squares(const float* x, std::int64_t n);

// out = grad / scale as float32 (grad of any floating dtype, any strides; out contiguous float32
// of the same shape), computed as grad * (1 / scale) in double (exact for the power-of-two scales
// of dynamic loss scaling); returns true when every element of out is finite. One pass.
bool unscale_and_check(const Tensor& grad, double scale, Tensor& out);

}  // namespace mixprec::cpu
