// Reductions: sum (times a scale, for mean) and max over the rows or the columns of a contiguous
// matrix, and argmax along one axis. Values are read as float (double for float64) and accumulated
// per thread in float for runs of kFlush elements, then in double, as the CPU backend does per
// chunk: a long float running sum loses accuracy (every addition to a large partial sum rounds).
// When a reduction has too few outputs to fill the GPU, each output is split across several
// blocks whose partial results (double) a second small kernel combines in a fixed order, so results
// are deterministic (no atomics).
#include <cmath>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/reduce_index.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/column_sums_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

constexpr int kFlush = 64;                    // float additions before folding into double
constexpr std::int64_t kTargetBlocks = 512;   // enough blocks to fill a large GPU ~4 times
constexpr std::int64_t kMinRowChunk = 4096;   // elements per block when a row is split
constexpr std::int64_t kMinColumnRows = 256;  // rows per block when columns are split

__device__ __forceinline__ double combine(ReduceOp op, double acc, double v) {
  if (op == ReduceOp::sum) return acc + v;
  return (v > acc || v != v) ? v : acc;  // NaN, once seen, stays (NaN > x is false)
}

__device__ __forceinline__ double identity(ReduceOp op) {
  return op == ReduceOp::sum ? 0.0 : -HUGE_VAL;
}

// Per-thread accumulation of values v: float runs folded into a double total.
template <typename C>
struct Accumulator {
  ReduceOp op;
  C run;
  int count = 0;
  double total;
  __device__ explicit Accumulator(ReduceOp o)
      : op(o), run(static_cast<C>(identity(o))), total(identity(o)) {}
  __device__ __forceinline__ void add(C v) {
    if (op == ReduceOp::sum) {
      run += v;
      if (++count == kFlush) {
        total += static_cast<double>(run);
        run = C(0);
        count = 0;
      }
    } else {
      run = (v > run || v != v) ? v : run;
    }
  }
  __device__ __forceinline__ double result() const {
    return combine(op, total, static_cast<double>(run));
  }
};

// Combines one double per thread across the block (blockDim.x * blockDim.y threads, a multiple of
// 32); the result is valid in thread (0, 0).
__device__ double block_combine(ReduceOp op, double v) {
  __shared__ double warp_results[32];
  const int lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32;
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
  const int warps = (blockDim.x * blockDim.y) / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine(op, v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_results[lane] : identity(op);
    for (int offset = 16; offset > 0; offset /= 2)
      v = combine(op, v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}

template <typename T>
__device__ __forceinline__ void store_result(ReduceOp op, double total, double scale, T* out) {
  using C = compute_t<T>;
  *out = from_compute<T>(static_cast<C>(op == ReduceOp::sum ? total * scale : total));
}

std::int64_t row_chunks(std::int64_t rows, std::int64_t length) {
  if (rows >= kTargetBlocks / 2 || length <= kMinRowChunk) return 1;
  const std::int64_t by_length = (length + kMinRowChunk - 1) / kMinRowChunk;
  const std::int64_t by_blocks = (kTargetBlocks + rows - 1) / rows;
  return by_length < by_blocks ? by_length : by_blocks;
}

std::int64_t column_splits(std::int64_t outer, std::int64_t length, std::int64_t cols) {
  return middle_splits(outer, length, cols, kTargetBlocks, kMinColumnRows);
}

// Block b reduces chunk b % chunks of row b / chunks. 256 threads read consecutive elements.
template <typename T>
__global__ void rows_kernel(ReduceOp op, const T* __restrict__ x, std::int64_t length,
                            std::int64_t chunks, double scale, double* __restrict__ partials,
                            T* __restrict__ out) {
  const std::int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const std::int64_t per_chunk = (length + chunks - 1) / chunks;
  const std::int64_t begin = chunk * per_chunk;
  const std::int64_t end = begin + per_chunk < length ? begin + per_chunk : length;
  const T* base = x + row * length;
  Accumulator<compute_t<T>> acc(op);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc.add(to_compute(base[i]));
  const double total = block_combine(op, acc.result());
  if (threadIdx.x != 0) return;
  if (chunks == 1) {
    store_result(op, total, scale, out + row);
  } else {
    partials[blockIdx.x] = total;
  }
}

// x (outer, length, cols): block (bx, by, bz) reduces columns bx*32 .. bx*32+31 of outer item bz
// over the by-th of `splits` row ranges; threads (32, 8). Index math: kernels/reduce_index.h.
// outer = 1 is the leading-axes case (bias gradients); outer > 1 the middle axes (global average
// pooling over NHWC: (N, H*W, C)).
template <typename T>
__global__ void columns_kernel(ReduceOp op, const T* __restrict__ x, std::int64_t length,
                               std::int64_t cols, std::int64_t splits, double scale,
                               double* __restrict__ partials, T* __restrict__ out) {
  __shared__ double column_totals[8][33];  // padded: no bank conflicts on the transposed read
  const std::int64_t o = blockIdx.z;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const RowRange rows = middle_split_rows(blockIdx.y, splits, length);
  Accumulator<compute_t<T>> acc(op);
  if (col < cols) {
    for (std::int64_t r = rows.begin + threadIdx.y; r < rows.end; r += blockDim.y)
      acc.add(to_compute(x[middle_offset(o, r, col, length, cols)]));
  }
  column_totals[threadIdx.y][threadIdx.x] = acc.result();
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  double total = column_totals[0][threadIdx.x];
  for (int y = 1; y < 8; ++y) total = combine(op, total, column_totals[y][threadIdx.x]);
  if (splits == 1) {
    store_result(op, total, scale, out + o * cols + col);
  } else {
    partials[middle_partial_index(o, blockIdx.y, col, splits, cols)] = total;
  }
}

// out[i] (i = o * cols + c) = combination of the splits' partials of item i, in split order.
template <typename T>
__global__ void finish_middle_kernel(ReduceOp op, const double* __restrict__ partials,
                                     std::int64_t items, std::int64_t splits, std::int64_t cols,
                                     double scale, T* __restrict__ out) {
  for (std::int64_t i = global_thread(); i < items; i += grid_threads()) {
    double total = identity(op);
    for (std::int64_t j = 0; j < splits; ++j)
      total = combine(op, total, partials[middle_partial_of_item(i, j, splits, cols)]);
    store_result(op, total, scale, out + i);
  }
}

// out[i] = combination of partials[i * item_stride + j * part_stride] for j < parts, in order.
template <typename T>
__global__ void finish_kernel(ReduceOp op, const double* __restrict__ partials, std::int64_t items,
                              std::int64_t parts, std::int64_t item_stride,
                              std::int64_t part_stride, double scale, T* __restrict__ out) {
  for (std::int64_t i = global_thread(); i < items; i += grid_threads()) {
    double total = identity(op);
    for (std::int64_t j = 0; j < parts; ++j)
      total = combine(op, total, partials[i * item_stride + j * part_stride]);
    store_result(op, total, scale, out + i);
  }
}

// ---- argmax ----
// The values compared: float (double for float64) for floating types, the integer itself for
// integers (int64 does not fit a float exactly), 0/1 for bool.
__device__ __forceinline__ float key_of(float v) { return v; }
__device__ __forceinline__ double key_of(double v) { return v; }
__device__ __forceinline__ float key_of(__half v) { return __half2float(v); }
__device__ __forceinline__ float key_of(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ std::int32_t key_of(std::int32_t v) { return v; }
__device__ __forceinline__ std::int64_t key_of(std::int64_t v) { return v; }
__device__ __forceinline__ std::int32_t key_of(std::uint8_t v) { return v; }
__device__ __forceinline__ std::int32_t key_of(bool v) { return v ? 1 : 0; }

// NumPy semantics: the first maximum wins (strictly greater replaces); the first NaN is the
// maximum (once the best is NaN nothing replaces it).
template <typename K>
__device__ __forceinline__ bool replaces(K v, K best) {
  if constexpr (std::is_floating_point_v<K>) {
    if (best != best) return false;
    return v != v || v > best;
  } else {
    return v > best;
  }
}

// One thread per (outer, inner) line, walking the axis; threads of a warp read consecutive inner
// positions, so reads coalesce when inner > 1.
template <typename T>
__global__ void argmax_kernel(const T* __restrict__ x, std::int64_t outer, std::int64_t length,
                              std::int64_t inner, std::int64_t* __restrict__ out) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = global_thread(); line < lines; line += grid_threads()) {
    const std::int64_t o = line / inner, c = line % inner;
    const T* p = x + o * length * inner + c;
    auto best = key_of(p[0]);
    std::int64_t index = 0;
    for (std::int64_t l = 1; l < length; ++l) {
      const auto v = key_of(p[l * inner]);
      if (replaces(v, best)) best = v, index = l;
    }
    out[line] = index;
  }
}

template <typename T>
void launch_argmax(const void* x, std::int64_t outer, std::int64_t length, std::int64_t inner,
                   std::int64_t* out, cudaStream_t s) {
  argmax_kernel<T><<<blocks_for(outer * inner), kThreads, 0, s>>>(static_cast<const T*>(x), outer,
                                                                  length, inner, out);
}

}  // namespace

std::int64_t reduce_rows_partials(std::int64_t rows, std::int64_t length) {
  const std::int64_t chunks = row_chunks(rows, length);
  return chunks > 1 ? rows * chunks : 0;
}

std::int64_t reduce_middle_partials(std::int64_t outer, std::int64_t length, std::int64_t cols) {
  const std::int64_t splits = column_splits(outer, length, cols);
  return splits > 1 ? splits * outer * cols : 0;
}

std::int64_t reduce_columns_partials(std::int64_t length, std::int64_t cols) {
  return reduce_middle_partials(1, length, cols);
}

void reduce_rows(ReduceOp op, DType dtype, const void* x, std::int64_t rows, std::int64_t length,
                 double scale, double* partials, void* out, cudaStream_t s) {
  const std::int64_t chunks = row_chunks(rows, length);
  dispatch_floating(dtype, "reduce", [&]<typename T>() {
    T* o = static_cast<T*>(out);
    rows_kernel<T><<<static_cast<unsigned>(rows * chunks), kThreads, 0, s>>>(
        op, static_cast<const T*>(x), length, chunks, scale, partials, o);
    if (chunks > 1) {
      finish_kernel<T>
          <<<blocks_for(rows), kThreads, 0, s>>>(op, partials, rows, chunks, chunks, 1, scale, o);
    }
  });
  check_launch("reduce_rows");
}

void reduce_middle(ReduceOp op, DType dtype, const void* x, std::int64_t outer, std::int64_t length,
                   std::int64_t cols, double scale, double* partials, void* out, cudaStream_t s) {
  const std::int64_t splits = column_splits(outer, length, cols);
  dispatch_floating(dtype, "reduce", [&]<typename T>() {
    T* o = static_cast<T*>(out);
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(splits),
                    static_cast<unsigned>(outer));
    columns_kernel<T><<<grid, dim3(32, 8), 0, s>>>(op, static_cast<const T*>(x), length, cols,
                                                   splits, scale, partials, o);
    if (splits > 1) {
      finish_middle_kernel<T><<<blocks_for(outer * cols), kThreads, 0, s>>>(
          op, partials, outer * cols, splits, cols, scale, o);
    }
  });
  check_launch("reduce_middle");
}

// The column sums' work split (column_sums_kernels.cuh): about kColumnThreads pass-1 threads of
// one 16-byte vector of columns each, at most kMaxColumnParts parts per output (its warp adds
// them), and at least kMinColumnRowsPerPart rows per part (each part costs a double written and
// read again).
namespace {
constexpr std::int64_t kColumnThreads = std::int64_t{1} << 17;
constexpr std::int64_t kMaxColumnParts = 2048;
constexpr std::int64_t kMinColumnRowsPerPart = 16;

std::int64_t column_vector(DType dtype, std::int64_t cols) {
  const std::int64_t v = 16 / static_cast<std::int64_t>(dtype_size(dtype));
  return cols % v == 0 ? v : 1;
}
}  // namespace

std::int64_t column_sum_parts(DType dtype, std::int64_t outer, std::int64_t length,
                              std::int64_t cols) {
  const std::int64_t lanes = outer * (cols / column_vector(dtype, cols));
  std::int64_t parts = kColumnThreads / (lanes > 0 ? lanes : 1);
  parts = parts < kMaxColumnParts ? parts : kMaxColumnParts;
  const std::int64_t by_rows = length / kMinColumnRowsPerPart;
  parts = parts < by_rows ? parts : by_rows;
  return parts < 1 ? 1 : parts;
}

std::int64_t column_sum_partials(DType dtype, std::int64_t outer, std::int64_t length,
                                 std::int64_t cols) {
  return outer * cols * column_sum_parts(dtype, outer, length, cols);
}

void reduce_middle_sum(DType dtype, const void* x, std::int64_t outer, std::int64_t length,
                       std::int64_t cols, double scale, double* partials, void* out,
                       cudaStream_t s) {
  using namespace column_sums_kernels;
  const std::int64_t parts = column_sum_parts(dtype, outer, length, cols);
  const std::int64_t outputs = outer * cols;
  dispatch_floating(dtype, "reduce", [&]<typename T>() {
    const T* xp = static_cast<const T*>(x);
    constexpr int kVector = static_cast<int>(16 / sizeof(T));
    const auto pass1 = [&]<int V>() {
      const std::int64_t threads = outer * parts * (cols / V);
      column_partials_kernel<T, V>
          <<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, s>>>(
              xp, outer, length, cols, parts, partials);
    };
    if (cols % kVector == 0 && aligned16(x)) {
      pass1.template operator()<kVector>();
    } else {
      pass1.template operator()<1>();
    }
    check_launch("column sums");
    const std::int64_t finish_threads = outputs * kWarp;
    column_finish_kernel<T>
        <<<static_cast<unsigned>((finish_threads + kThreads - 1) / kThreads), kThreads, 0, s>>>(
            partials, outputs, parts, scale, static_cast<T*>(out));
  });
  check_launch("column sums finish");
}

void reduce_columns(ReduceOp op, DType dtype, const void* x, std::int64_t length, std::int64_t cols,
                    double scale, double* partials, void* out, cudaStream_t s) {
  reduce_middle(op, dtype, x, 1, length, cols, scale, partials, out, s);
}

void argmax(DType dtype, const void* x, std::int64_t outer, std::int64_t length, std::int64_t inner,
            std::int64_t* out, cudaStream_t s) {
  switch (dtype) {
    case DType::float32: launch_argmax<float>(x, outer, length, inner, out, s); break;
    case DType::float16: launch_argmax<__half>(x, outer, length, inner, out, s); break;
    case DType::bfloat16: launch_argmax<__nv_bfloat16>(x, outer, length, inner, out, s); break;
    case DType::float64: launch_argmax<double>(x, outer, length, inner, out, s); break;
    case DType::int32: launch_argmax<std::int32_t>(x, outer, length, inner, out, s); break;
    case DType::int64: launch_argmax<std::int64_t>(x, outer, length, inner, out, s); break;
    case DType::uint8: launch_argmax<std::uint8_t>(x, outer, length, inner, out, s); break;
    case DType::bool_: launch_argmax<bool>(x, outer, length, inner, out, s); break;
  }
  check_launch("argmax");
}

}  // namespace mixprec::cuda::kernels
