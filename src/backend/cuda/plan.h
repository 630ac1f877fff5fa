// Host-side construction of the kernels' elementwise geometry (kernels::Strided<K>): broadcasting
// resolved to stride-0 axes, extent-1 axes dropped and adjacent axes merged wherever every operand
// allows it (a contiguous tensor is one axis), the 32-bit index check and the dense test.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/kernels/launch.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// Strides of `t` seen through broadcasting to `out` (0 where t has extent 1 or lacks the axis).
std::vector<std::int64_t> broadcast_strides(const Tensor& t, const Shape& out);

// The geometry of a walk over `shape` with each operand's strides (one vector per operand, of
// shape.rank() entries). Throws ShapeError when more than kernels::kMaxDims axes remain after
// merging.
template <int K>
kernels::Strided<K> make_strided(const Shape& shape,
                                 const std::array<std::vector<std::int64_t>, K>& strides);

// Inputs broadcast to `out` (a fresh contiguous output walked in row-major order).
template <int K>
kernels::Strided<K> make_plan(const Shape& out, const std::array<const Tensor*, K>& inputs) {
  std::array<std::vector<std::int64_t>, K> strides;
  for (int k = 0; k < K; ++k) strides[k] = broadcast_strides(*inputs[k], out);
  return make_strided<K>(out, strides);
}

// A two-operand plan (operand 0 = source, operand 1 = destination) that is a plain 2-D transpose:
// the source is a contiguous rows x cols matrix and the destination its contiguous cols x rows
// transpose, dst[c * rows + r] = src[r * cols + c]. After make_strided's merging, copying a
// permuted view that only swaps two groups of axes (the convolution's HWIO <-> KRSC filters) has
// this form: sizes (A, B) with strides (B, 1) and (1, A), or (1, A) and (B, 1).
struct TransposePlan {
  std::int64_t rows = 0, cols = 0;
};
// The transpose that `plan` is, or nothing (one axis, three or more, broadcasting, gaps).
std::optional<TransposePlan> transpose_plan(const kernels::Strided<2>& plan);

}  // namespace mixprec::cuda
