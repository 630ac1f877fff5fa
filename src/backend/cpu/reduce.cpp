#include "backend/cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
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

// One stored value in the compute type: 16-bit values widened in registers (simd_convert.h).
template <typename C, typename T>
inline C widen(const T* p) {
  if constexpr (std::is_same_v<T, double>) {
    return *p;
  } else {
    return simd::load(p);
  }
}

// The rows [r0, r1) of an (R, cols) matrix reduced over columns [start, start + n): sums run in C
// over blocks of kChunk rows and the block results are added in double (one float accumulator
// over a long column would lose accuracy: each addition to a large partial sum rounds, with a
// systematic bias when the addends are alike); maxima are exact. Results in `result` (double).
template <typename T>
MIXPREC_CPU_CLONES void reduce_column_block(ReduceOp op, const T* x, std::int64_t cols,
                                            std::int64_t r0, std::int64_t r1, std::int64_t start,
                                            std::int64_t n, double* result) {
  using C = core::compute_t<T>;
  alignas(64) C acc[kChunk];
  std::fill(acc, acc + n, identity<C>(op));
  std::fill(result, result + n, op == ReduceOp::sum ? 0.0 : static_cast<double>(acc[0]));
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* row = x + r * cols + start;
    if (op == ReduceOp::sum) {
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) acc[i] += widen<C>(row + i);
      if ((r - r0 + 1) % kChunk == 0 || r + 1 == r1) {
        for (std::int64_t i = 0; i < n; ++i) result[i] += static_cast<double>(acc[i]);
        std::fill(acc, acc + n, C(0));
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) acc[i] = combine(op, acc[i], widen<C>(row + i));
    }
  }
  if (op != ReduceOp::sum) {
    for (std::int64_t i = 0; i < n; ++i) result[i] = static_cast<double>(acc[i]);
  }
}

// (outer, R, cols) contiguous -> (outer, cols) values, accumulating whole rows (cache-friendly for
// bias gradients, outer == 1, and for the spatial means of NHWC activations, outer == batch). The
// tasks are (outer block, chunk of columns, block of rows): with few outer blocks and columns (a
// bias gradient over a whole activation) the rows are cut into blocks too, a number fixed by the
// shape, whose partial results are combined in block order, so the result does not depend on the
// thread count.
template <typename T>
void reduce_leading(ReduceOp op, const T* x, std::int64_t outer, std::int64_t length,
                    std::int64_t cols, double scale, T* out) {
  using C = core::compute_t<T>;
  const std::int64_t col_chunks = (cols + kChunk - 1) / kChunk;
  const std::int64_t column_tasks = outer * col_chunks;
  const std::int64_t row_blocks =
      column_tasks >= 8 ? 1 : std::clamp<std::int64_t>(length / 256, 1, 16);
  const std::int64_t rows_per_block = (length + row_blocks - 1) / row_blocks;
  // One result slot of `width` values per task (a chunk of kChunk columns at most).
  const std::int64_t width = std::min(kChunk, cols);
  std::vector<double> partial(static_cast<std::size_t>(column_tasks * row_blocks * width));
  parallel_for(column_tasks * row_blocks, outer * length * cols >= kParallelThreshold,
               [&](std::int64_t task) {
                 const std::int64_t t = task / row_blocks, b = task % row_blocks;
                 const std::int64_t o = t / col_chunks, start = (t % col_chunks) * kChunk;
                 const std::int64_t r0 = std::min(length, b * rows_per_block);
                 const std::int64_t r1 = std::min(length, r0 + rows_per_block);
                 reduce_column_block(op, x + o * length * cols, cols, r0, r1, start,
                                     std::min(kChunk, cols - start), partial.data() + task * width);
               });
  for (std::int64_t t = 0; t < column_tasks; ++t) {
    const std::int64_t o = t / col_chunks, start = (t % col_chunks) * kChunk;
    const std::int64_t n = std::min(kChunk, cols - start);
    const double* first = partial.data() + t * row_blocks * width;
    for (std::int64_t i = 0; i < n; ++i) {
      double v = first[i];
      for (std::int64_t b = 1; b < row_blocks; ++b) {
        const double w = first[b * width + i];
        v = op == ReduceOp::sum ? v + w : combine<double>(op, v, w);
      }
      if (op == ReduceOp::sum) v *= scale;
      out[o * cols + start + i] = core::store_as<T>(static_cast<C>(v));
    }
  }
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
