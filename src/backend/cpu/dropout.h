// CPU dropout kernel (TensorKernels::dropout).
#pragma once

#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// x * m, element i's m = keep when counter_keeps(base, i, threshold) else 0, computed as the
// binary x * m would be (float, double for float64) and rounded once. `keep` is already a value
// of x's dtype. A dropped element is x * 0, so NaN and Inf stay visible.
Tensor dropout(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep);

}  // namespace mixprec::cpu
