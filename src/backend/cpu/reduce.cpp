#include "backend/cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/reduce_split.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

template <typename C>
C identity(ReduceOp op) {
  return op == ReduceOp::sum ? C(0) : -std::numeric_limits<C>::infinity();
}

template <typename C>
C combine(ReduceOp op, C acc, C v) {
  if (op == ReduceOp::sum) return acc + v;
  return (v > acc || std::isnan(v)) ? v : acc;  // NaN, once seen, stays (NaN > x is false)
}

// (rows, R) contiguous -> rows values: each row is summed chunk by chunk in C, chunk results
// combined in double so long rows keep float32-level relative accuracy.
template <typename T>
void reduce_rows(ReduceOp op, const T* x, std::int64_t rows, std::int64_t length, double scale,
                 T* out) {
  using C = core::compute_t<T>;
  parallel_for(rows, rows * length >= kParallelThreshold, [&](std::int64_t r) {
    alignas(64) C buffer[kChunk];
    double total = op == ReduceOp::sum ? 0.0 : -std::numeric_limits<double>::infinity();
    for (std::int64_t start = 0; start < length; start += kChunk) {
      const std::int64_t n = std::min(kChunk, length - start);
      gather(x + r * length + start, 1, n, buffer);
      C acc = identity<C>(op);
      if (op == ReduceOp::sum) {
#pragma omp simd reduction(+ : acc)
        for (std::int64_t i = 0; i < n; ++i) acc += buffer[i];
        total += static_cast<double>(acc);
      } else {
        for (std::int64_t i = 0; i < n; ++i) acc = combine(op, acc, buffer[i]);
        total = combine<double>(op, total, static_cast<double>(acc));
      }
    }
    if (op == ReduceOp::sum) total *= scale;
    out[r] = core::store_as<T>(static_cast<C>(total));
  });
}

// (outer, R, cols) contiguous -> (outer, cols) values, accumulating whole rows (cache-friendly for
// bias gradients, outer == 1, and for the spatial means of NHWC activations, outer == batch).
// Sums run in C over blocks of kChunk rows and the block results are combined in double, as in
// reduce_rows: one float accumulator over a long column would lose accuracy (each addition to a
// large partial sum rounds, with a systematic bias when the addends are alike).
template <typename T>
void reduce_leading(ReduceOp op, const T* x, std::int64_t outer, std::int64_t length,
                    std::int64_t cols, double scale, T* out) {
  using C = core::compute_t<T>;
  const std::int64_t col_chunks = (cols + kChunk - 1) / kChunk;
  parallel_for(outer * col_chunks, outer * length * cols >= kParallelThreshold,
               [&](std::int64_t task) {
                 const std::int64_t o = task / col_chunks, c = task % col_chunks;
                 const T* xo = x + o * length * cols;
                 const std::int64_t start = c * kChunk, n = std::min(kChunk, cols - start);
                 alignas(64) C acc[kChunk];
                 alignas(64) C buffer[kChunk];
                 alignas(64) double total[kChunk];
                 std::fill(acc, acc + n, identity<C>(op));
                 std::fill(total, total + n, 0.0);
                 for (std::int64_t r = 0; r < length; ++r) {
                   gather(xo + r * cols + start, 1, n, buffer);
                   if (op == ReduceOp::sum) {
#pragma omp simd
                     for (std::int64_t i = 0; i < n; ++i) acc[i] += buffer[i];
                     if ((r + 1) % kChunk == 0 || r + 1 == length) {
                       for (std::int64_t i = 0; i < n; ++i) total[i] += static_cast<double>(acc[i]);
                       std::fill(acc, acc + n, C(0));
                     }
                   } else {
                     for (std::int64_t i = 0; i < n; ++i) acc[i] = combine(op, acc[i], buffer[i]);
                   }
                 }
                 if (op == ReduceOp::sum) {
                   for (std::int64_t i = 0; i < n; ++i) acc[i] = static_cast<C>(total[i] * scale);
                 }
                 scatter(acc, n, out + o * cols + start);
               });
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis, double scale) {
  const core::ReduceSplit split = core::split_reduce_axes(x.shape(), reduce_axis);
  const std::vector<int>& kept = split.kept;
  const std::vector<int>& reduced = split.reduced;
  const std::int64_t kept_n = split.kept_n, reduced_n = split.reduced_n;
  Tensor out = core::make_tensor(Shape(split.out_dims), x.dtype(), x.device());

  // Reduced axes consecutive with kept axes after them -> column accumulation over the reduced
  // rows of each block of the kept axes before them (a bias gradient: none before; the spatial
  // mean of NHWC activations: the batch before, the channels after), reading x in place.
  // Otherwise move the reduced axes last -> rows. A full reduction (one output) is one row: its
  // chunks run through the vectorised row loop.
  const int rank = x.shape().rank();
  bool columns = !reduced.empty() && reduced.back() != rank - 1;
  for (std::size_t i = 0; i < reduced.size(); ++i)
    columns = columns && reduced[i] == reduced.front() + static_cast<int>(i);
  std::int64_t outer = 1, inner = 1;
  if (columns) {
    for (int a = 0; a < reduced.front(); ++a) outer *= x.shape()[a];
    for (int a = reduced.back() + 1; a < rank; ++a) inner *= x.shape()[a];
    columns = inner > 1;
  }
  Tensor src = x;
  if (!columns) {
    std::vector<int> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    src = x.detach().permute(order);
  }
  src = src.detach().contiguous();
  core::dispatch_floating(x.dtype(), "reduce", [&]<typename T>() {
    const T* in = static_cast<const T*>(src.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    if (reduced_n == 0) {
      std::fill(o, o + kept_n, core::store_as<T>(identity<core::compute_t<T>>(op)));
    } else if (columns) {
      reduce_leading(op, in, outer, reduced_n, inner, scale, o);
    } else {
      reduce_rows(op, in, kept_n, reduced_n, scale, o);
    }
  });
  return out;
}

}  // namespace mixprec::cpu
