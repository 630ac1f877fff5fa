// The blocked OpenMP loop helpers shared by the CPU batch-norm kernels: x (..., C) seen as a
// row-major (M, C) matrix and its fixed blocks of rows (results independent of the thread count),
// used by the register-resident sweeps (batch_norm_activation_sweeps.h); and the generic chunked
// loops (per-channel sums, 16-bit <-> float32 conversion through buffers, normalization) that
// batch_norm.cpp runs for float64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cpu/contiguous_map.h"
#include "mixprec/convert.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu::bn_loops {

// ---- geometry ----

// x (..., C) as a row-major (M, C) matrix.
struct Rows {
  std::int64_t m = 0;
  std::int64_t c = 0;
};

inline Rows rows_of(const Tensor& x) {
  Rows r;
  r.c = x.dim(-1);
  r.m = 1;
  for (int i = 0; i + 1 < x.rank(); ++i) r.m *= x.dim(i);
  return r;
}

// ---- reference loops ----

// The rows are cut into at most kMaxBlocks blocks of at least kMinBlockElements elements. Each
// block sums its rows sequentially in the compute type (float32; float64 for float64), and the
// block sums are added in float64: the result is independent of the thread count, and the error of
// a channel sum over M rows grows like M / blocks instead of M. (401,408 rows of a 32x112x112
// activation: 1,568 rows per block.)
constexpr std::int64_t kMaxBlocks = 256;
constexpr std::int64_t kMinBlockElements = std::int64_t{1} << 14;
// Rows are converted from 16-bit storage to float32 a chunk of about this many elements at a time
// (8 KiB of float32, so a chunk of x and one of dy stay in L1).
constexpr std::int64_t kChunkElements = 2048;
// Below this many elements the loops run on one thread.
constexpr std::int64_t kParallelElements = std::int64_t{1} << 15;

struct Blocking {
  std::int64_t rows = 1;   // rows per block
  std::int64_t count = 0;  // blocks
};

inline Blocking blocking(Rows r) {
  const std::int64_t min_rows =
      std::max<std::int64_t>(1, kMinBlockElements / std::max<std::int64_t>(r.c, 1));
  Blocking b;
  b.rows = std::max(min_rows, (r.m + kMaxBlocks - 1) / kMaxBlocks);
  b.count = (r.m + b.rows - 1) / b.rows;
  return b;
}

inline std::int64_t chunk_rows(std::int64_t c) {
  return std::max<std::int64_t>(1, kChunkElements / std::max<std::int64_t>(c, 1));
}

// Calls f(first_row, rows) for consecutive chunks of the rows [r0, r1).
template <typename F>
void for_each_chunk(std::int64_t r0, std::int64_t r1, std::int64_t c, F&& f) {
  const std::int64_t step = chunk_rows(c);
  for (std::int64_t r = r0; r < r1; r += step) f(r, std::min(step, r1 - r));
}

// The n values at src in the compute type P: contiguous_map.h's view_or_convert (src itself when
// it already has that type, else converted into `buffer`).
using contiguous_detail::view_or_convert;

// Where to compute n output values: dst itself when it has the compute type, else `buffer`,
// rounded into dst by store() afterwards.
template <typename P, typename T>
P* output(T* dst, P* buffer) {
  if constexpr (std::is_same_v<T, P>) {
    return dst;
  } else {
    return buffer;
  }
}

template <typename P, typename T>
void store(const P* values, std::int64_t n, T* dst) {
  if constexpr (!std::is_same_v<T, P>) convert(values, dst, static_cast<std::size_t>(n));
}

// Per-channel sums of `width` quantities over all rows: accumulate(r0, r1, sums) adds the
// contributions of rows [r0, r1) into sums[width * C] (zeroed, type P). Returns the totals in
// float64, laid out the same way.
template <typename P, typename Accumulate>
std::vector<double> channel_sums(Rows r, int width, Accumulate&& accumulate) {
  const Blocking b = blocking(r);
  const std::int64_t stride = width * r.c;
  std::vector<P> partial(static_cast<std::size_t>(b.count * stride), P(0));
#pragma omp parallel for schedule(static) if (r.m * r.c >= kParallelElements)
  for (std::int64_t k = 0; k < b.count; ++k) {
    const std::int64_t r0 = k * b.rows;
    accumulate(r0, std::min(r.m, r0 + b.rows), partial.data() + k * stride);
  }
  std::vector<double> total(static_cast<std::size_t>(stride), 0.0);
  for (std::int64_t k = 0; k < b.count; ++k) {
    const P* p = partial.data() + k * stride;
    for (std::int64_t i = 0; i < stride; ++i) total[static_cast<std::size_t>(i)] += p[i];
  }
  return total;
}

// Calls body(r0, r1) for the blocks of rows, in parallel when large.
template <typename Body>
void parallel_rows(Rows r, Body&& body) {
  const Blocking b = blocking(r);
#pragma omp parallel for schedule(static) if (r.m * r.c >= kParallelElements)
  for (std::int64_t k = 0; k < b.count; ++k) {
    const std::int64_t r0 = k * b.rows;
    body(r0, std::min(r.m, r0 + b.rows));
  }
}

inline std::size_t buffer_size(std::int64_t c) {
  return static_cast<std::size_t>(chunk_rows(c) * std::max<std::int64_t>(c, 1));
}

// y = (x - mean) * scale + shift per channel. (x - mean) first: with |mean| >> std the product
// form x * scale + (shift - mean * scale) would cancel catastrophically.
template <typename T, typename P>
void normalize(const T* x, Rows r, const P* mean, const P* scale, const P* shift, T* y) {
  const std::int64_t c = r.c;
  parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<P> in(buffer_size(c)), out(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const P* px = view_or_convert(x + row * c, n * c, in.data());
      P* py = output<P>(y + row * c, out.data());
      for (std::int64_t i = 0; i < n; ++i) {
        const P* xi = px + i * c;
        P* yi = py + i * c;
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) yi[j] = (xi[j] - mean[j]) * scale[j] + shift[j];
      }
      store(py, n * c, y + row * c);
    });
  });
}

template <typename P>
std::vector<P> inverse_std(const std::vector<P>& variance, P epsilon) {
  std::vector<P> inv(variance.size());
  for (std::size_t j = 0; j < variance.size(); ++j)
    inv[j] = P(1) / std::sqrt(variance[j] + epsilon);
  return inv;
}

// The batch mean and the biased variance per channel (P: float32, float64 for float64 x), in two
// passes (the mean, then the mean of (x - mean)^2), never as E[x^2] - E[x]^2.
template <typename T, typename P>
void batch_statistics(const T* x, Rows r, P* mean, P* variance) {
  const std::int64_t c = r.c;
  const auto sums = channel_sums<P>(r, 1, [&](std::int64_t r0, std::int64_t r1, P* acc) {
    std::vector<P> in(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const P* px = view_or_convert(x + row * c, n * c, in.data());
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) acc[j] += px[i * c + j];
      }
    });
  });
  for (std::int64_t j = 0; j < c; ++j) mean[j] = P(sums[static_cast<std::size_t>(j)] / double(r.m));
  const auto squares = channel_sums<P>(r, 1, [&](std::int64_t r0, std::int64_t r1, P* acc) {
    std::vector<P> in(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const P* px = view_or_convert(x + row * c, n * c, in.data());
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          const P d = px[i * c + j] - mean[j];
          acc[j] += d * d;
        }
      }
    });
  });
  for (std::int64_t j = 0; j < c; ++j) {
    variance[j] = P(squares[static_cast<std::size_t>(j)] / double(r.m));
  }
}

}  // namespace mixprec::cpu::bn_loops
