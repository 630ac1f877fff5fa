// The CPU loops of training: the fused optimizer update (one pass reads the gradient, the variable
// and its slots once and writes them once, calling the shared kernel_math::update_element<K> for a
// compile-time K, so the loop vectorises), the fused unscale+check of loss scaling, the finiteness
// check and a deterministic sum of squares for clipping. Every loop is elementwise or sums in a
// fixed block order, so results do not depend on the thread count. The TrainingKernels table of
// the CPU (training_kernels.cpp) is built on these.
#pragma once

#include <cstdint>

#include "backend/kernel_math/training.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// One variable's update of `rule` over n float32 elements; slots[k] for k < update_slot_count.
void update(const kernel_math::UpdateRule& rule, float* var, const float* grad,
            float* const (&slots)[kernel_math::kMaxUpdateSlots], std::int64_t n, float clip_scale);

// sum(x[i]^2) in double. Partial sums over fixed blocks are combined in block order, so the result
// is the same for every thread count (clipping must not make runs irreproducible).
double sum_of_squares(const float* x, std::int64_t n);

// out = grad / scale as float32 (grad of any floating dtype, any strides; out contiguous float32
// of the same shape), computed as kernel_math::unscale_element(grad, 1 / scale); returns true when
// every element of out is finite. One pass.
bool unscale_and_check(const Tensor& grad, double scale, Tensor& out);

// Whether every element of `grad` (any floating dtype, any strides) is finite once converted to
// float32, the dtype the update reads (a float64 value past FLT_MAX counts as non-finite).
bool finite_as_float32(const Tensor& grad);

}  // namespace mixprec::cpu
