// The CPU elementwise engine. Every elementwise op (unary, binary with broadcasting, where, casts)
// runs through `map_elementwise`: inputs of any strides are read in chunks of up to kChunk
// elements into float (double for float64) buffers, the op's functor runs on the buffers, and the
// result is rounded once into the contiguous output. Bulk 16-bit conversion uses F16C where
// present, so the functors see plain float arrays and vectorise.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/scalar.h"
#include "mixprec/convert.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

inline constexpr std::int64_t kChunk = 1024;
// Below this many elements the loop runs on one thread (thread start-up costs more).
inline constexpr std::int64_t kParallelThreshold = 1 << 15;

// The geometry of a K-input elementwise op after broadcasting and merging of axes: a row-major
// loop over `dims` (the last one innermost) with per-input strides (0 on broadcast axes).
template <std::size_t K>
struct BroadcastPlan {
  std::vector<std::int64_t> dims;
  std::array<std::vector<std::int64_t>, K> strides;
  std::int64_t numel = 1;
};

// Strides of `t` seen through broadcasting to `out` (0 where t has extent 1 or lacks the axis).
std::vector<std::int64_t> broadcast_strides(const Tensor& t, const Shape& out);

template <std::size_t K>
BroadcastPlan<K> make_plan(const Shape& out, const std::array<const Tensor*, K>& inputs) {
  BroadcastPlan<K> plan;
  plan.numel = out.numel();
  std::array<std::vector<std::int64_t>, K> full;
  for (std::size_t k = 0; k < K; ++k) full[k] = broadcast_strides(*inputs[k], out);
  for (int i = 0; i < out.rank(); ++i) {
    if (out[i] == 1) continue;
    bool merge = !plan.dims.empty();
    for (std::size_t k = 0; k < K && merge; ++k) {
      merge = plan.strides[k].back() == full[k][static_cast<std::size_t>(i)] * out[i];
    }
    if (merge) {
      plan.dims.back() *= out[i];
      for (std::size_t k = 0; k < K; ++k)
        plan.strides[k].back() = full[k][static_cast<std::size_t>(i)];
    } else {
      plan.dims.push_back(out[i]);
      for (std::size_t k = 0; k < K; ++k)
        plan.strides[k].push_back(full[k][static_cast<std::size_t>(i)]);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    for (auto& s : plan.strides) s.push_back(0);
  }
  return plan;
}

// Reads n elements at stride `stride` into the compute buffer.
template <typename T, typename C>
inline void gather(const T* src, std::int64_t stride, std::int64_t n, C* dst) {
  if (stride == 0) {
    std::fill(dst, dst + n, core::load_as<C>(*src));
  } else if (stride == 1) {
    if constexpr (std::is_same_v<T, C>) {
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(C));
    } else if constexpr (core::is_half_v<T> && std::is_same_v<C, float>) {
      convert(src, dst, static_cast<std::size_t>(n));
    } else {
      for (std::int64_t i = 0; i < n; ++i) dst[i] = core::load_as<C>(src[i]);
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = core::load_as<C>(src[i * stride]);
  }
}

// Writes n computed values to contiguous storage, rounding once.
template <typename T, typename C>
inline void scatter(const C* src, std::int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, C>) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(C));
  } else if constexpr (core::is_half_v<T> && std::is_same_v<C, float>) {
    convert(src, dst, static_cast<std::size_t>(n));
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = core::store_as<T>(src[i]);
  }
}

// Calls body(offsets, out_offset, n, inner_strides) over the plan in chunks of at most kChunk
// contiguous output elements, in parallel when the op is large (small ops enter no OpenMP region).
template <std::size_t K, typename Body>
void for_each_chunk(const BroadcastPlan<K>& plan, Body body) {
  const int rank = static_cast<int>(plan.dims.size());
  const std::int64_t inner = plan.dims.back();
  const std::int64_t chunks_per_row = (inner + kChunk - 1) / kChunk;
  const std::int64_t rows = inner == 0 ? 0 : plan.numel / inner;
  const std::int64_t units = rows * chunks_per_row;
  std::array<std::int64_t, K> inner_strides;
  for (std::size_t k = 0; k < K; ++k) inner_strides[k] = plan.strides[k].back();
  parallel_for(units, plan.numel >= kParallelThreshold, [&](std::int64_t u) {
    const std::int64_t row = u / chunks_per_row;
    const std::int64_t start = (u % chunks_per_row) * kChunk;
    std::array<std::int64_t, K> offsets{};
    std::int64_t rem = row;
    for (int i = rank - 2; i >= 0; --i) {
      const std::int64_t d = plan.dims[static_cast<std::size_t>(i)];
      const std::int64_t idx = rem % d;
      rem /= d;
      for (std::size_t k = 0; k < K; ++k)
        offsets[k] += idx * plan.strides[k][static_cast<std::size_t>(i)];
    }
    for (std::size_t k = 0; k < K; ++k) offsets[k] += start * inner_strides[k];
    body(offsets, row * inner + start, std::min(kChunk, inner - start), inner_strides);
  });
}

namespace detail {
// Gathers the chunk of each input into buffers[1..K] and calls f(buffers[0], buffers[1], ..., n).
template <typename C, typename Out, typename InTuple, typename F, std::size_t... I>
inline void run_chunk(std::index_sequence<I...>, const void* const* bases,
                      const std::int64_t* offsets, const std::int64_t* strides, std::int64_t n,
                      Out* out, F& f) {
  alignas(64) C buffers[sizeof...(I) + 1][kChunk];
  (gather(static_cast<const std::tuple_element_t<I, InTuple>*>(bases[I]) + offsets[I], strides[I],
          n, buffers[I + 1]),
   ...);
  f(buffers[0], static_cast<const C*>(buffers[I + 1])..., n);
  scatter(buffers[0], n, out);
}
}  // namespace detail

// out[i] = f(in0[i], ..., in{K-1}[i]) over broadcast inputs of storage types In... and a
// contiguous output of type Out. The functor is called once per chunk with compute-type buffers:
//   f(C* out, const C* in0, ..., n)
// C is the compute type: float for 32/16-bit floats (and integers), double for float64.
template <typename C, typename Out, typename... In, typename F>
void map_elementwise(std::initializer_list<const Tensor*> input_list, Tensor& out, F f) {
  constexpr std::size_t K = sizeof...(In);
  std::array<const Tensor*, K> inputs{};
  std::copy(input_list.begin(), input_list.end(), inputs.begin());
  const auto plan = make_plan<K>(out.shape(), inputs);
  std::array<const void*, K> bases;
  for (std::size_t k = 0; k < K; ++k) bases[k] = inputs[k]->data_ptr();
  Out* out_data = static_cast<Out*>(out.data_ptr());
  for_each_chunk<K>(
      plan, [&](const auto& offsets, std::int64_t out_offset, std::int64_t n, const auto& strides) {
        detail::run_chunk<C, Out, std::tuple<In...>>(std::make_index_sequence<K>{}, bases.data(),
                                                     offsets.data(), strides.data(), n,
                                                     out_data + out_offset, f);
      });
}

}  // namespace mixprec::cpu
