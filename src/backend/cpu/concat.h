// CPU kernels of concat and of its backward (split): byte copies of blocks, for every dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Copies the inputs (any strides, out's dtype, extents equal to out's except on `axis`) one after
// the other along `axis` into the contiguous `out`.
void concat(const std::vector<Tensor>& inputs, int axis, const Tensor& out);

// The inverse of concat: cuts `g` along `axis` into consecutive pieces of `extents[k]` positions,
// each a new contiguous tensor; pieces with wanted[k] false are left undefined.
std::vector<Tensor> split(const Tensor& g, int axis, const std::vector<std::int64_t>& extents,
                          const std::vector<bool>& wanted);

}  // namespace mixprec::cpu
