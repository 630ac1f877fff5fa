// Views shared by the matmul ops (matmul.cpp, matmul_accumulation.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor_impl.h"

namespace mixprec::ops {

// x viewed with leading extent-1 axes up to `rank` (no copy, no autograd).
inline Tensor pad_rank(const Tensor& x, int rank) {
  if (x.rank() == rank) return x;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank - x.rank()), 1);
  std::vector<std::int64_t> strides(dims.size(), x.numel());
  dims.insert(dims.end(), x.shape().begin(), x.shape().end());
  strides.insert(strides.end(), x.strides().begin(), x.strides().end());
  return core::make_view(x, Shape(dims), strides, x.offset());
}

}  // namespace mixprec::ops
