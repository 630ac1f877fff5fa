// The copy-free path of the CPU elementwise kernels: when every operand is contiguous and of the
// output's shape (or, for the channel-broadcast case, a (rows, C) operand times a (C) row per
// group of rows), float32 and float64 operands are read and written in place instead of going
// through map_elementwise's gather and scatter buffers; 16-bit operands are converted a chunk at a
// time into float buffers (F16C / AVX512-BF16 where present) and rounded once on the way out.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/cpu/elementwise.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "mixprec/convert.h"

namespace mixprec::cpu {

namespace contiguous_detail {

template <typename T, typename C>
const C* view_or_convert(const T* src, std::int64_t n, C* buffer) {
  if constexpr (std::is_same_v<T, C>) {
    return src;
  } else {
    convert(src, buffer, static_cast<std::size_t>(n));
    return buffer;
  }
}

template <typename C, typename T, std::size_t K, typename F, std::size_t... I>
void run_span(std::index_sequence<I...>, const std::array<const T*, K>& in, T* out,
              std::int64_t start, std::int64_t n, F& f) {
  if constexpr (std::is_same_v<T, C>) {
    f(out + start, (in[I] + start)...);
    static_cast<void>(n);
  } else {
    alignas(64) C buffers[K + 1][kChunk];
    f(buffers[K], view_or_convert(in[I] + start, n, buffers[I])...);
    convert(static_cast<const C*>(buffers[K]), out + start, static_cast<std::size_t>(n));
  }
}

}  // namespace contiguous_detail

// out[i] = f(in0[i], ...) over n contiguous elements of storage type T, computed in
// C = core::compute_t<T>: f(C* out, const C* in0, ..., std::int64_t count) is called per span
// (in place for float32/float64 storage), in parallel for large n.
template <typename T, std::size_t K, typename F>
void map_contiguous(const std::array<const T*, K>& in, T* out, std::int64_t n, F f) {
  using C = core::compute_t<T>;
  const std::int64_t spans = (n + kChunk - 1) / kChunk;
  auto call = [&](std::int64_t s) {
    const std::int64_t start = s * kChunk;
    const std::int64_t count = std::min(kChunk, n - start);
    auto g = [&](C* o, auto... p) { f(o, p..., count); };
    contiguous_detail::run_span<C>(std::make_index_sequence<K>{}, in, out, start, count, g);
  };
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (std::int64_t s = 0; s < spans; ++s) call(s);
}

}  // namespace mixprec::cpu
