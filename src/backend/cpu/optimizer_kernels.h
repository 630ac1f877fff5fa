// The CPU loops of training: the fused optimizer update (one pass reads the gradient, the variable
// and its slots once and writes them once, calling the shared kernel_math::update_element<K> for a
// compile-time K, so the loop vectorises), the fused unscale+check of loss scaling, the finiteness
// check and a deterministic sum of squares for clipping. Every loop is elementwise or sums in a
// fixed block order, so results do not depend on the thread count. The entries over many tensors
// cut them all into fixed blocks and run one parallel region per call, not one per tensor. The
// TrainingKernels table of the CPU (training_kernels.cpp) is built on these.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/kernel_math/training.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// One variable of a multi-tensor update as float32 arrays of n elements; slots[k] for
// k < update_slot_count(rule.kind).
struct UpdateArrays {
  float* variable = nullptr;
  const float* gradient = nullptr;
  float* slots[kernel_math::kMaxUpdateSlots] = {nullptr, nullptr, nullptr};
  std::int64_t n = 0;
  float clip_scale = 1.0f;
};

// The update of `rule` over every variable in one parallel region (none when the total is small):
// the variables are cut into fixed blocks that the threads share. Elementwise, so each result is
// bit for bit the one the variable's own update gives.
void update_all(const kernel_math::UpdateRule& rule, std::span<const UpdateArrays> variables);

// One variable's update of `rule` over n float32 elements; slots[k] for k < update_slot_count.
void update(const kernel_math::UpdateRule& rule, float* var, const float* grad,
            float* const (&slots)[kernel_math::kMaxUpdateSlots], std::int64_t n, float clip_scale);

// sum(x[i]^2) in double. Partial sums over fixed blocks are combined in block order, so the result
// is the same for every thread count (clipping must not make runs irreproducible).
double sum_of_squares(const float* x, std::int64_t n);

// sum_of_squares of each (pointer, n) array, all in one parallel region; each result equals
// sum_of_squares of that array alone.
std::vector<double> sums_of_squares(std::span<const std::pair<const float*, std::int64_t>> arrays);

// out = grad / scale as float32 (grad of any floating dtype, any strides; out contiguous float32
// of the same shape), computed as kernel_math::unscale_element(grad, 1 / scale); returns true when
// every element of out is finite. One pass.
bool unscale_and_check(const Tensor& grad, double scale, Tensor& out);

// unscale_and_check of every (grads[i], outs[i]) pair in one parallel region; true when every
// result is finite. With `outs` empty nothing is written and only finiteness (as float32, with
// scale 1 as for check_finite) is tested.
bool unscale_and_check_all(std::span<const Tensor> grads, double scale, std::span<Tensor> outs);

// Whether every element of `grad` (any floating dtype, any strides) is finite once converted to
// float32, the dtype the update reads (a float64 value past FLT_MAX counts as non-finite).
bool finite_as_float32(const Tensor& grad);

}  // namespace mixprec::cpu
