// The axes of a reduction split into kept and reduced ones, with the output extents (reduced axes
// kept as 1) and the element counts of each side. Shared by the CPU and CUDA reduce kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/shape.h"

namespace mixprec::core {

struct ReduceSplit {
  std::vector<std::int64_t> out_dims;  // x's extents with every reduced axis set to 1
  std::vector<int> kept, reduced;      // axis numbers, in order
  std::int64_t kept_n = 1, reduced_n = 1;
};

inline ReduceSplit split_reduce_axes(const Shape& shape, const std::vector<bool>& reduce_axis) {
  ReduceSplit s;
  s.out_dims.resize(static_cast<std::size_t>(shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) {
    const bool r = reduce_axis[static_cast<std::size_t>(i)];
    s.out_dims[static_cast<std::size_t>(i)] = r ? 1 : shape[i];
    (r ? s.reduced : s.kept).push_back(i);
    (r ? s.reduced_n : s.kept_n) *= shape[i];
  }
  return s;
}

}  // namespace mixprec::core
