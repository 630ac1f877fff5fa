// CUDA concat and its backward, split (mirrors cpu/concat.h), for every dtype: strided copies.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::cuda {

// Copies the inputs (any strides, out's dtype and device, extents equal to out's except on `axis`)
// one after the other along `axis` into `out`.
void concat(const std::vector<Tensor>& inputs, int axis, const Tensor& out);

// Cuts `g` along `axis` into consecutive pieces of extents[k] positions, each a new contiguous
// tensor; pieces with wanted[k] false are left undefined.
std::vector<Tensor> split(const Tensor& g, int axis, const std::vector<std::int64_t>& extents,
                          const std::vector<bool>& wanted);

}  // namespace mixprec::cuda
