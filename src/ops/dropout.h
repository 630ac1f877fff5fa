// The dropout op (internal): x times a counter-based keep mask, differentiable. The Dropout layer
// (src/layers/dropout.cpp) draws the key and calls it; the kernels are the backends'
// (TensorKernels::dropout).
#pragma once

#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::ops {

// What one call's mask depends on: the key drawn from the layer's generator, the threshold of the
// rate (core::keep_threshold) and the keep scale 1 / (1 - rate) in double (rounded to the dtype
// of what it multiplies).
struct DropoutMask {
  std::uint64_t base = 0;
  std::uint64_t threshold = 0;
  double keep_scale = 1.0;
};

// x * m in x's dtype (floating), element i's m = keep_scale if core::counter_keeps(base, i,
// threshold) else 0, computed as the binary x * m would be: float(x) * float(m) (double for
// float64), rounded once. A dropped element is x * 0, not 0, so NaN and Inf stay visible (an
// overflowed gradient must still reach loss scaling's check). The gradient is dy * m: the same
// mask, regenerated from the key (nothing saved but the 24-byte key).
Tensor dropout(const Tensor& x, const DropoutMask& mask);

}  // namespace mixprec::ops
