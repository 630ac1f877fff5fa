#include "backend/cuda/plan.h"

#include <limits>
#include <string>

#include "mixprec/error.h"

namespace mixprec::cuda {

std::vector<std::int64_t> broadcast_strides(const Tensor& t, const Shape& out) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(out.rank()), 0);
  const int lead = out.rank() - t.rank();
  for (int i = 0; i < t.rank(); ++i) {
    if (t.shape()[i] != 1)
      strides[static_cast<std::size_t>(i + lead)] = t.strides()[static_cast<std::size_t>(i)];
  }
  return strides;
}

template <int K>
kernels::Strided<K> make_strided(const Shape& shape,
                                 const std::array<std::vector<std::int64_t>, K>& strides) {
  // Merge axis i into the previous kept axis when, for every operand, stepping the previous axis
  // once equals stepping axis i across its whole extent.
  std::vector<std::int64_t> dims;
  std::array<std::vector<std::int64_t>, K> merged;
  for (int i = 0; i < shape.rank(); ++i) {
    const std::int64_t extent = shape[i];
    if (extent == 1) continue;
    const auto u = static_cast<std::size_t>(i);
    bool merge = !dims.empty();
    for (int k = 0; k < K && merge; ++k) merge = merged[k].back() == strides[k][u] * extent;
    if (merge) {
      dims.back() *= extent;
      for (int k = 0; k < K; ++k) merged[k].back() = strides[k][u];
    } else {
      dims.push_back(extent);
      for (int k = 0; k < K; ++k) merged[k].push_back(strides[k][u]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (int k = 0; k < K; ++k) merged[k].push_back(0);
  }
  if (dims.size() > static_cast<std::size_t>(kernels::kMaxDims)) {
    throw ShapeError("CUDA elementwise kernels support up to " + std::to_string(kernels::kMaxDims) +
                     " axes after merging contiguous ones; shape " + shape.to_string() +
                     " with these strides needs " + std::to_string(dims.size()) +
                     "; make the operands contiguous first");
  }
  kernels::Strided<K> plan;
  plan.ndim = static_cast<int>(dims.size());
  plan.numel = shape.numel();
  constexpr std::int64_t kLimit = std::numeric_limits<std::int32_t>::max();
  bool index32 = plan.numel <= kLimit;
  bool dense = plan.ndim == 1;
  for (int d = 0; d < plan.ndim; ++d) plan.sizes[d] = dims[static_cast<std::size_t>(d)];
  for (int k = 0; k < K; ++k) {
    std::int64_t reach = 0;  // the largest offset of operand k
    for (int d = 0; d < plan.ndim; ++d) {
      const std::int64_t s = merged[k][static_cast<std::size_t>(d)];
      plan.strides[k][d] = s;
      if (s < 0) index32 = false;  // never produced by mixprec's views; keep the 64-bit path safe
      reach += (dims[static_cast<std::size_t>(d)] - 1) * (s < 0 ? -s : s);
    }
    index32 = index32 && reach <= kLimit;
    dense = dense && (plan.strides[k][0] == 1 || plan.numel <= 1);
  }
  plan.index32 = index32;
  plan.dense = dense;
  return plan;
}

std::optional<TransposePlan> transpose_plan(const kernels::Strided<2>& plan) {
  if (plan.ndim != 2) return std::nullopt;
  const std::int64_t a = plan.sizes[0], b = plan.sizes[1];
  const auto is = [&](int k, std::int64_t outer, std::int64_t inner) {
    return plan.strides[k][0] == outer && plan.strides[k][1] == inner;
  };
  // The source walks rows-first (a contiguous a x b matrix), the destination columns-first.
  if (is(0, b, 1) && is(1, 1, a)) return TransposePlan{a, b};
  // The destination walks rows-first: the source is a contiguous b x a matrix read columns-first.
  if (is(0, 1, a) && is(1, b, 1)) return TransposePlan{b, a};
  return std::nullopt;
}

template kernels::Strided<1> make_strided<1>(const Shape&,
                                             const std::array<std::vector<std::int64_t>, 1>&);
template kernels::Strided<2> make_strided<2>(const Shape&,
                                             const std::array<std::vector<std::int64_t>, 2>&);
template kernels::Strided<3> make_strided<3>(const Shape&,
                                             const std::array<std::vector<std::int64_t>, 3>&);

}  // namespace mixprec::cuda
