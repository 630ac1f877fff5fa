// CPU kernels of argmax and one_hot (backend/tensor_kernels.h): integer-valued, single passes.
#pragma once

#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// out (int64, contiguous) = the first index of the maximum of x along `axis` (NumPy: the first
// maximum wins on ties, the first NaN is the maximum).
void argmax(const Tensor& x, int axis, const Tensor& out);
// out (indices' shape + (depth,), contiguous) = one-hot rows in out's dtype. Reads and checks
// every index first and throws ValueError, writing nothing, when one is outside [0, depth).
void one_hot(const Tensor& indices, std::int64_t depth, const Tensor& out);

}  // namespace mixprec::cpu
