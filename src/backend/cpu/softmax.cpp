#include "backend/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/axis_layout.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

using core::AxisLayout;
using core::layout_of;

// A tile is `length` rows of up to `width` columns held in the compute buffer. 32K elements
// (128 KiB of float) stays near L2 while keeping the column loops long enough to vectorise.
constexpr std::int64_t kTileElements = 1 << 15;

// Columns per tile: 1 for axis-last; otherwise the whole slab when it fits, else as many columns
// as fit (at least one: a very long axis is still read once, into a buffer of `length`).
std::int64_t tile_width(const AxisLayout& a) {
  if (a.inner == 1) return 1;
  return std::clamp<std::int64_t>(kTileElements / std::max<std::int64_t>(a.length, 1), 1, a.inner);
}

// Reads the tile (length, n) at column c0 of slab o into buf, row l at buf + l * n.
template <typename T, typename C>
void load_tile(const T* base, const AxisLayout& a, std::int64_t o, std::int64_t c0, std::int64_t n,
               C* buf) {
  const T* slab = base + o * a.length * a.inner + c0;
  if (n == a.inner) {
    gather(slab, 1, a.length * n, buf);  // the slab is one contiguous run
    return;
  }
  for (std::int64_t l = 0; l < a.length; ++l) gather(slab + l * a.inner, 1, n, buf + l * n);
}

// Writes the tile back, rounding once to T.
template <typename T, typename C>
void store_tile(const C* buf, const AxisLayout& a, std::int64_t o, std::int64_t c0, std::int64_t n,
                T* base) {
  T* slab = base + o * a.length * a.inner + c0;
  if (n == a.inner) {
    scatter(buf, a.length * n, slab);
    return;
  }
  for (std::int64_t l = 0; l < a.length; ++l) scatter(buf + l * n, n, slab + l * a.inner);
}

// Calls body(o, c0, n, scratch) for every tile, in parallel for large tensors. Each thread owns
// a scratch buffer of `scratch_size` compute values, reused across its tiles.
template <typename C, typename Body>
void for_each_tile(const AxisLayout& a, std::int64_t width, std::size_t scratch_size, Body body) {
  const std::int64_t tiles = (a.inner + width - 1) / width;
  const std::int64_t units = a.outer * tiles;
  const std::int64_t numel = a.outer * a.length * a.inner;
  if (numel < kParallelThreshold || units < 2) {  // no OpenMP region at all for small tensors
    std::vector<C> scratch(scratch_size);
    for (std::int64_t u = 0; u < units; ++u) {
      const std::int64_t o = u / tiles, c0 = (u % tiles) * width;
      body(o, c0, std::min(width, a.inner - c0), scratch.data());
    }
    return;
  }
#pragma omp parallel
  {
    std::vector<C> scratch(scratch_size);
#pragma omp for schedule(static)
    for (std::int64_t u = 0; u < units; ++u) {
      const std::int64_t o = u / tiles, c0 = (u % tiles) * width;
      body(o, c0, std::min(width, a.inner - c0), scratch.data());
    }
  }
}

// ---- forward ----

// One contiguous row of length L, in place. A NaN anywhere makes the whole row NaN (through the
// sum), whichever value the max picked; +inf gives NaN (inf - inf), as in PyTorch.
template <typename C>
void forward_row(SoftmaxKind kind, C* v, std::int64_t length) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 0; i < length; ++i) m = v[i] > m ? v[i] : m;
  C s = 0;
  if (kind == SoftmaxKind::softmax) {
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < length; ++i) {
      v[i] = std::exp(v[i] - m);
      s += v[i];
    }
    // Divide rather than multiply by 1/s: one rounding before the store.
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) v[i] /= s;
  } else {
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < length; ++i) s += std::exp(v[i] - m);
    // (x - m) - log(s) rather than x - (m + log(s)): with large logits (6e4 in float16) m + log(s)
    // would lose log(s) to the rounding of m; x - m is exact near the max (Sterbenz).
    const C log_s = std::log(s);
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) v[i] = (v[i] - m) - log_s;
  }
}

// A (length, n) tile, in place, each column independently; `scratch` holds 2n values.
template <typename C>
void forward_tile(SoftmaxKind kind, C* v, std::int64_t length, std::int64_t n, C* scratch) {
  C* m = scratch;
  C* s = scratch + n;
  std::fill(m, m + n, -std::numeric_limits<C>::infinity());
  std::fill(s, s + n, C(0));
  for (std::int64_t l = 0; l < length; ++l) {
    const C* row = v + l * n;
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
  }
  if (kind == SoftmaxKind::softmax) {
    for (std::int64_t l = 0; l < length; ++l) {
      C* row = v + l * n;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - m[j]);
        s[j] += row[j];
      }
    }
    for (std::int64_t l = 0; l < length; ++l) {
      C* row = v + l * n;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) row[j] /= s[j];
    }
  } else {
    for (std::int64_t l = 0; l < length; ++l) {
      const C* row = v + l * n;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) s[j] += std::exp(row[j] - m[j]);
    }
    for (std::int64_t j = 0; j < n; ++j) s[j] = std::log(s[j]);
    for (std::int64_t l = 0; l < length; ++l) {
      C* row = v + l * n;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) row[j] = (row[j] - m[j]) - s[j];
    }
  }
}

template <typename T>
void forward_typed(SoftmaxKind kind, const T* x, const AxisLayout& a, T* y) {
  using C = core::compute_t<T>;
  const std::int64_t width = tile_width(a);
  const auto tile = static_cast<std::size_t>(a.length * width);
  for_each_tile<C>(a, width, tile + 2 * static_cast<std::size_t>(width),
                   [&](std::int64_t o, std::int64_t c0, std::int64_t n, C* scratch) {
                     C* v = scratch + 2 * width;
                     load_tile(x, a, o, c0, n, v);
                     if (n == 1) {
                       forward_row(kind, v, a.length);
                     } else {
                       forward_tile(kind, v, a.length, n, scratch);
                     }
                     store_tile(v, a, o, c0, n, y);
                   });
}

// ---- backward ----

// One row: g is overwritten with dx.
template <typename C>
void backward_row(SoftmaxKind kind, C* g, const C* y, std::int64_t length) {
  C s = 0;
  if (kind == SoftmaxKind::softmax) {
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < length; ++i) s += g[i] * y[i];
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) g[i] = y[i] * (g[i] - s);
  } else {
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < length; ++i) s += g[i];
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) g[i] = g[i] - std::exp(y[i]) * s;
  }
}

// A (length, n) tile: g is overwritten with dx; `s` holds n values.
template <typename C>
void backward_tile(SoftmaxKind kind, C* g, const C* y, std::int64_t length, std::int64_t n, C* s) {
  std::fill(s, s + n, C(0));
  const bool is_softmax = kind == SoftmaxKind::softmax;
  for (std::int64_t l = 0; l < length; ++l) {
    const C* gr = g + l * n;
    const C* yr = y + l * n;
    if (is_softmax) {
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) s[j] += gr[j] * yr[j];
    } else {
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) s[j] += gr[j];
    }
  }
  for (std::int64_t l = 0; l < length; ++l) {
    C* gr = g + l * n;
    const C* yr = y + l * n;
    if (is_softmax) {
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) gr[j] = yr[j] * (gr[j] - s[j]);
    } else {
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) gr[j] = gr[j] - std::exp(yr[j]) * s[j];
    }
  }
}

template <typename T>
void backward_typed(SoftmaxKind kind, const T* g, const T* y, const AxisLayout& a, T* dx) {
  using C = core::compute_t<T>;
  const std::int64_t width = tile_width(a);
  const auto tile = static_cast<std::size_t>(a.length * width);
  for_each_tile<C>(a, width, 2 * tile + static_cast<std::size_t>(width),
                   [&](std::int64_t o, std::int64_t c0, std::int64_t n, C* scratch) {
                     C* gb = scratch + width;
                     C* yb = gb + tile;
                     load_tile(g, a, o, c0, n, gb);
                     load_tile(y, a, o, c0, n, yb);
                     if (n == 1) {
                       backward_row(kind, gb, yb, a.length);
                     } else {
                       backward_tile(kind, gb, yb, a.length, n, scratch);
                     }
                     store_tile(gb, a, o, c0, n, dx);
                   });
}

}  // namespace

Tensor softmax_forward(SoftmaxKind kind, const Tensor& x, int axis) {
  const Tensor src = x.detach().contiguous();
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  const AxisLayout a = layout_of(x.shape(), axis);
  core::dispatch_floating(x.dtype(), "softmax", [&]<typename T>() {
    forward_typed(kind, static_cast<const T*>(src.data_ptr()), a, static_cast<T*>(out.data_ptr()));
  });
  return out;
}

Tensor softmax_backward(SoftmaxKind kind, const Tensor& g, const Tensor& y, int axis) {
  const Tensor gc = g.detach().contiguous();
  const Tensor yc = y.detach().contiguous();
  Tensor dx = core::make_tensor(y.shape(), y.dtype(), y.device());
  if (y.numel() == 0) return dx;
  const AxisLayout a = layout_of(y.shape(), axis);
  core::dispatch_floating(y.dtype(), "softmax backward", [&]<typename T>() {
    backward_typed(kind, static_cast<const T*>(gc.data_ptr()), static_cast<const T*>(yc.data_ptr()),
                   a, static_cast<T*>(dx.data_ptr()));
  });
  return dx;
}

}  // namespace mixprec::cpu
