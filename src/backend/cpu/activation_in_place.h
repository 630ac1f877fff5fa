// y = act(y) in place on the CPU for relu and relu6 (NnKernels::activation_in_place): a
// convolution's fresh output activated where it lies, with the per-element function of the unfused
// ops (kernel_math::unary_value: NaN stays NaN), so the results are the same bits.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// y contiguous, on the CPU, floating; act relu or relu6 (anything else throws mixprec::Error).
void activation_in_place(const Tensor& y, UnaryOp act);

}  // namespace mixprec::cpu
