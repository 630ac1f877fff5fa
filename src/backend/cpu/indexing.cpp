// CPU argmax and one_hot: one pass each, no float math.
#include "backend/cpu/indexing.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "core/axis_layout.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// ---- argmax ----

using core::AxisLayout;
using core::layout_of;

template <typename T>
inline constexpr bool is_float_storage_v = std::is_floating_point_v<T> || core::is_half_v<T>;

// The type values are compared in: float for 16/32-bit floats, double for float64, the storage
// type itself for integers and bool (int64 does not fit in a float exactly).
template <typename T>
using compare_t = std::conditional_t<is_float_storage_v<T>, core::compute_t<T>, T>;

// NumPy semantics: the first maximum wins on ties (strictly greater replaces), and the first NaN
// is the maximum (once the best is NaN nothing replaces it).
template <typename V>
inline bool replaces(V v, V best) {
  if constexpr (std::is_floating_point_v<V>) {
    if (best != best) return false;
    return v != v || v > best;
  } else {
    return v > best;
  }
}

// Starting from the lowest value with index 0 gives the right answer for an all-lowest (or
// all -inf) row too: nothing replaces it and the first index is the answer.
template <typename V>
constexpr V lowest() {
  if constexpr (std::is_floating_point_v<V>)
    return -std::numeric_limits<V>::infinity();
  else
    return std::numeric_limits<V>::lowest();
}

template <typename T>
void argmax_typed(const T* x, const AxisLayout& a, std::int64_t* out) {
  using V = compare_t<T>;
  constexpr std::int64_t kWidth = kChunk;
  const std::int64_t tiles = (a.inner + kWidth - 1) / kWidth;
  const std::int64_t units = a.outer * tiles;
#pragma omp parallel for schedule( \
    static) if (a.outer * a.length * a.inner >= kParallelThreshold && units > 1)
  for (std::int64_t u = 0; u < units; ++u) {
    const std::int64_t o = u / tiles, c0 = (u % tiles) * kWidth;
    const std::int64_t n = std::min(kWidth, a.inner - c0);
    const T* slab = x + o * a.length * a.inner + c0;
    alignas(64) V buffer[kWidth];
    if (a.inner == 1) {
      // A contiguous row, read in chunks.
      V best = lowest<V>();
      std::int64_t index = 0;
      for (std::int64_t start = 0; start < a.length; start += kWidth) {
        const std::int64_t m = std::min(kWidth, a.length - start);
        gather(slab + start, 1, m, buffer);
        for (std::int64_t i = 0; i < m; ++i) {
          if (replaces(buffer[i], best)) best = buffer[i], index = start + i;
        }
      }
      out[o] = index;
    } else {
      // n columns at once, walking the axis row by row (contiguous reads).
      alignas(64) V best[kWidth];
      std::int64_t index[kWidth];
      std::fill(best, best + n, lowest<V>());
      std::fill(index, index + n, std::int64_t{0});
      for (std::int64_t l = 0; l < a.length; ++l) {
        gather(slab + l * a.inner, 1, n, buffer);
        for (std::int64_t j = 0; j < n; ++j) {
          if (replaces(buffer[j], best[j])) best[j] = buffer[j], index[j] = l;
        }
      }
      std::copy(index, index + n, out + o * a.inner + c0);
    }
  }
}

}  // namespace

void argmax(const Tensor& x, int axis, const Tensor& out) {
  Tensor handle = out;  // a handle: writing through it writes out's storage
  const Tensor src = x.detach().contiguous();
  const core::AxisLayout layout = core::layout_of(x.shape(), axis);
  core::dispatch_dtype(x.dtype(), [&]<typename T>() {
    argmax_typed(static_cast<const T*>(src.data_ptr()), layout,
                 static_cast<std::int64_t*>(handle.data_ptr()));
  });
}

void one_hot(const Tensor& indices, std::int64_t depth, const Tensor& out) {
  Tensor handle = out;  // a handle: writing through it writes out's storage
  const std::int64_t count = indices.numel();
  // Read every index (as int64) and check the range before allocating or writing the output.
  const Tensor src = indices.detach().contiguous();
  std::vector<std::int64_t> values(static_cast<std::size_t>(count));
  core::dispatch_dtype(indices.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = static_cast<const T*>(src.data_ptr());
      for (std::int64_t i = 0; i < count; ++i) values[static_cast<std::size_t>(i)] = p[i];
    }
  });
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t v = values[static_cast<std::size_t>(i)];
    if (v < 0 || v >= depth) {
      throw ValueError("one_hot: index " + std::to_string(v) + " (at flat position " +
                       std::to_string(i) + " of indices " + indices.shape().to_string() +
                       ") is out of range for depth " + std::to_string(depth) +
                       (depth > 0 ? " (valid: 0 to " + std::to_string(depth - 1) + ")"
                                  : " (no index is valid)"));
    }
  }

  std::memset(handle.data_ptr(), 0, out.nbytes());  // all-zero bits is 0 in every dtype
  core::dispatch_dtype(out.dtype(), [&]<typename T>() {
    const T one = core::from_double<T>(1.0);
    T* o = static_cast<T*>(handle.data_ptr());
#pragma omp parallel for schedule(static) if (count * depth >= kParallelThreshold)
    for (std::int64_t i = 0; i < count; ++i)
      o[i * depth + values[static_cast<std::size_t>(i)]] = one;
  });
}

}  // namespace mixprec::cpu
