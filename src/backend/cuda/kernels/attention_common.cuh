// What the fused attention kernels share (attention_forward.cuh, attention_backward.cuh; all of
// them through attention_kernels.cuh): the block shapes, the shared-memory layouts, the masking
// and dropout rules, the row loaders and the tensor-core products of one warp.
//
// The kernels run on the device (attention.cu) and, by a block emulation, on the CPU
// (tests/unit/cuda_attention_emulation_test.cpp). Besides the types of cuda/attention.h and
// core/counter_hash.h they use only to_compute, from_compute, compute_t, exp, log, block_index,
// thread_in_block, block_sync (__syncthreads), warp_sync (__syncwarp), shared_memory (the
// block's dynamic shared memory) and the wmma names (nvcuda::wmma), defined by attention.cu for
// the device and by tests/support/cuda_block_emulation.h for the host. Include after one of those.
//
// Fragments are used only through the collective wmma operations and element-wise updates that
// treat every element alike (acc.x[t] += tmp.x[t] * s): the element-to-position map of a fragment
// is unspecified, and the emulation holds the whole tile in every lane.
//
// Numerics: scores, the online softmax, its sums and every product's accumulation in float
// (double for float64). The tensor-core products multiply 16-bit operands exactly into float
// accumulators; the float matrices that enter a product (the probabilities, dS) are split into a
// 16-bit high part and a 16-bit remainder (x = hi + lo to 2^-16 relative for bfloat16, 2^-22 for
// float16) and multiplied twice, so a product of them is as accurate as a float one to well below
// the output's rounding (one 16-bit rounding of P would cost up to a 16-bit ulp of every output).
// dS is first scaled by a power of two that brings its tile maximum into [1, 2): float16's range
// would overflow on loss-scaled gradients and flush small ones; the scaling is exact.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "core/counter_hash.h"

namespace mixprec::cuda::kernels::attention_kernels {

inline constexpr int kLanes = 32;
inline constexpr int kTile = 16;  // the wmma shape: 16 x 16 x 16

// ---- tensor-core kernels: 4 warps, each owning 16 rows (queries, or keys for dK / dV) ----
inline constexpr int kTcWarps = 4;
inline constexpr int kTcThreads = kTcWarps * kLanes;
inline constexpr std::int64_t kTcRows = kTcWarps * kTile;  // 64 rows per block
inline constexpr std::int64_t kFwdKeys = 64;               // keys per step of the forward
inline constexpr std::int64_t kDkvQueries = 32;            // queries per step of dK / dV
inline constexpr std::int64_t kDqKeys = 64;                // keys per step of dQ
inline constexpr std::int64_t kMaxTcDim = 128;

// ---- scalar kernels: blocks of kScalarQ queries x kScalarK keys ----
inline constexpr int kScalarThreads = 128;
inline constexpr std::int64_t kScalarQ = 16, kScalarK = 32;

// The row-dot kernel (D_i = dO_i . O_i): one thread per query.
inline constexpr int kRowThreads = 128;

__host__ __device__ inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Whether both head dims suit the tensor-core kernels (the dtype is the launcher's business).
inline bool tensor_core_dims(std::int64_t d, std::int64_t dv) {
  return d >= kTile && dv >= kTile && d <= kMaxTcDim && dv <= kMaxTcDim && d % kTile == 0 &&
         dv % kTile == 0;
}

// Shared-memory carving: every buffer starts 128-byte aligned (wmma wants 32).
struct Carve {
  std::size_t bytes = 0;
  __host__ __device__ std::size_t take(std::size_t n) {
    const std::size_t at = bytes;
    bytes += (n + 127) / 128 * 128;
    return at;
  }
};

// The shared buffers of each tensor-core kernel (byte offsets), for head dims d and dv; T is
// 16-bit (kHalf bytes).
inline constexpr std::size_t kHalf = 2, kF = sizeof(float);

struct ForwardLayout {
  std::size_t q, k, v, s, hi, lo, o, m, l, alpha, bytes;
  __host__ __device__ ForwardLayout(std::int64_t d, std::int64_t dv) {
    Carve c;
    q = c.take(kTcRows * d * kHalf);
    k = c.take(kFwdKeys * d * kHalf);
    v = c.take(kFwdKeys * dv * kHalf);
    s = c.take(kTcRows * kFwdKeys * kF);
    hi = c.take(kTcRows * kFwdKeys * kHalf);
    lo = c.take(kTcRows * kFwdKeys * kHalf);
    o = c.take(kTcRows * dv * kF);
    m = c.take(kTcRows * kF);
    l = c.take(kTcRows * kF);
    alpha = c.take(kTcRows * kF);
    bytes = c.bytes;
  }
};

struct DkvLayout {
  std::size_t k, v, q, dout, s, dp, hi, lo, dk, dv, lse, dr, amax, bytes;
  __host__ __device__ DkvLayout(std::int64_t d, std::int64_t dv_) {
    Carve c;
    k = c.take(kTcRows * d * kHalf);
    v = c.take(kTcRows * dv_ * kHalf);
    q = c.take(kDkvQueries * d * kHalf);
    dout = c.take(kDkvQueries * dv_ * kHalf);
    s = c.take(kTcRows * kDkvQueries * kF);
    dp = c.take(kTcRows * kDkvQueries * kF);
    hi = c.take(kTcRows * kDkvQueries * kHalf);
    lo = c.take(kTcRows * kDkvQueries * kHalf);
    dk = c.take(kTcRows * d * kF);
    dv = c.take(kTcRows * dv_ * kF);
    lse = c.take(kDkvQueries * kF);
    dr = c.take(kDkvQueries * kF);
    amax = c.take(kTcThreads * kF);
    bytes = c.bytes;
  }
};

struct DqLayout {
  std::size_t q, dout, k, v, s, dp, hi, lo, dq, lse, dr, amax, bytes;
  __host__ __device__ DqLayout(std::int64_t d, std::int64_t dv) {
    Carve c;
    q = c.take(kTcRows * d * kHalf);
    dout = c.take(kTcRows * dv * kHalf);
    k = c.take(kDqKeys * d * kHalf);
    v = c.take(kDqKeys * dv * kHalf);
    s = c.take(kTcRows * kDqKeys * kF);
    dp = c.take(kTcRows * kDqKeys * kF);
    hi = c.take(kTcRows * kDqKeys * kHalf);
    lo = c.take(kTcRows * kDqKeys * kHalf);
    dq = c.take(kTcRows * d * kF);
    lse = c.take(kTcRows * kF);
    dr = c.take(kTcRows * kF);
    amax = c.take(kTcThreads * kF);
    bytes = c.bytes;
  }
};

// The scalar kernels' shared memory: two kScalarQ x kScalarK tiles and three row vectors of C.
template <typename C>
inline std::size_t scalar_shared_bytes() {
  return (2 * kScalarQ * kScalarK + 3 * kScalarQ) * sizeof(C);
}

// Grid sizes (blocks) of the kernels.
inline std::int64_t query_blocks(const AttentionProblem& p, std::int64_t rows) {
  return p.batch * p.heads * ceil_div(p.q_len, rows);
}
inline std::int64_t key_blocks(const AttentionProblem& p, std::int64_t rows) {
  return p.batch * p.heads * ceil_div(p.k_len, rows);
}

// ---- shared helpers ----

template <typename C>
__device__ __forceinline__ C negative_infinity() {
  return -static_cast<C>(INFINITY);
}

// Whether query i sees key j (both possibly out of range: then no).
__device__ __forceinline__ bool visible(const AttentionProblem& p, std::int64_t b, std::int64_t h,
                                        std::int64_t i, std::int64_t j) {
  if (i >= p.q_len || j >= p.k_len) return false;
  if (p.causal && j > i + (p.k_len - p.q_len)) return false;
  if (p.mask != nullptr) {
    const std::int64_t at = b * p.mask_strides[0] + h * p.mask_strides[1] + i * p.mask_strides[2] +
                            j * p.mask_strides[3];
    if (!p.mask[at]) return false;
  }
  return true;
}

// The dropout factor of probability (b, h, i, j): keep_scale or 0 (1 without dropout).
template <typename C>
__device__ __forceinline__ C keep_factor(const AttentionProblem& p, std::int64_t b, std::int64_t h,
                                         std::int64_t i, std::int64_t j) {
  if (!p.dropout) return C(1);
  const auto index = static_cast<std::uint64_t>(((b * p.heads + h) * p.q_len + i) * p.k_len + j);
  const std::uint64_t base =
      p.dropout_base_in_memory != nullptr ? *p.dropout_base_in_memory : p.dropout_base;
  return core::counter_keeps(base, index, p.dropout_threshold) ? static_cast<C>(p.keep_scale)
                                                               : C(0);
}

// The last key (exclusive) that a block of queries [i0, i0 + nq) may see.
__device__ __forceinline__ std::int64_t key_end(const AttentionProblem& p, std::int64_t i0,
                                                std::int64_t nq) {
  if (!p.causal) return p.k_len;
  const std::int64_t e = i0 + nq + (p.k_len - p.q_len);
  return e < 0 ? 0 : (e > p.k_len ? p.k_len : e);
}

// The first query that may see key j0 (causal: i >= j0 - (Tk - Tq)).
__device__ __forceinline__ std::int64_t query_begin(const AttentionProblem& p, std::int64_t j0) {
  if (!p.causal) return 0;
  const std::int64_t s = j0 - (p.k_len - p.q_len);
  return s < 0 ? 0 : (s > p.q_len ? p.q_len : s);
}

// The (batch, head) and the first row of this block, for blocks of `rows` rows over `len` rows
// per head. In 32 bits: grids have fewer than 2^31 blocks, and a 64-bit division is a subroutine
// call on the GPU (whose register convention made ptxas spill).
struct BlockPlace {
  std::int64_t bh, b, h, first;
};
__device__ __forceinline__ BlockPlace block_place(const AttentionProblem& p, std::int64_t len,
                                                  std::int64_t rows) {
  const auto per_head = static_cast<unsigned>(ceil_div(len, rows));
  const auto heads = static_cast<unsigned>(p.heads);
  const auto unit = static_cast<unsigned>(block_index());
  const unsigned bh = unit / per_head, b = bh / heads;
  return {bh, b, bh - b * heads, static_cast<std::int64_t>(unit - bh * per_head) * rows};
}

// Rows [r0, r0 + rows) of one head of a (len, H, width) slice (src at row 0 of the head, rows
// row_stride apart) into dst (rows, width) row-major; rows past len are zeros (their products
// must be finite: a NaN left in shared memory would poison a tile product through P = 0).
template <typename T>
__device__ __forceinline__ void load_rows(const T* __restrict__ src, std::int64_t row_stride,
                                          std::int64_t r0, std::int64_t len, int rows, int width,
                                          T* dst) {
  for (int e = thread_in_block(); e < rows * width; e += kTcThreads) {
    const std::int64_t r = e / width, c = e - r * width;
    dst[e] = r0 + r < len ? src[(r0 + r) * row_stride + c] : from_compute<T>(compute_t<T>(0));
  }
}

template <typename P>
__device__ __forceinline__ void zero(P* dst, std::int64_t n) {
  for (int e = thread_in_block(); e < n; e += kTcThreads) dst[e] = P(0);
}

// The t-th column that the thread of row `row` visits in a row-per-thread loop over a row-major
// tile n columns wide (n a multiple of 32): rotated by the row, so that the threads of consecutive
// rows read different shared-memory banks (unrotated, every row's column c sits in the same bank).
// A fixed order per row: the sums stay deterministic.
__host__ __device__ inline int rotated(int t, int row, int n) { return (t + row) % n; }

// x as hi + lo, both in T.
template <typename T>
__device__ __forceinline__ void split(float x, T* hi, T* lo) {
  const T h = from_compute<T>(x);
  *hi = h;
  *lo = from_compute<T>(x - to_compute(h));
}

// A power of two that brings a tile maximum tmax > 0 into [1, 2) (1 for Inf / NaN, clamped to
// [2^-112, 2^112]): exact scalings, by multiplication only.
__device__ __forceinline__ float power_of_two_scale(float tmax) {
  float sc = 1.0f;
  if (!(tmax <= 3.0e38f)) return sc;
  while (tmax * sc >= 65536.0f && sc > 0x1p-96f) sc *= 0x1p-16f;
  while (tmax * sc < 0x1p-16f && sc < 0x1p96f) sc *= 0x1p16f;
  while (tmax * sc >= 2.0f && sc > 0x1p-112f) sc *= 0.5f;
  while (tmax * sc < 1.0f && sc < 0x1p112f) sc *= 2.0f;
  return sc;
}

// ---- tensor-core products of one warp ----
// The fragments of T (16-bit) with float accumulators.
template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::row_major>;
template <typename T>
using FragBRow = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::row_major>;
template <typename T>
using FragBCol = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

// out (16, n) row-major (ld_out) = a (16, depth) row-major (lda) x b^T, b (n, depth) row-major
// (ldb): the scores of 16 rows against n rows, n and depth multiples of 16.
template <typename T>
__device__ __forceinline__ void product_abt(const T* a, std::int64_t lda, const T* b,
                                            std::int64_t ldb, std::int64_t n, std::int64_t depth,
                                            float* out, std::int64_t ld_out) {
  FragA<T> fa;
  FragBCol<T> fb;
  FragAcc acc;
  for (std::int64_t c = 0; c < n; c += kTile) {
    wmma::fill_fragment(acc, 0.0f);
    for (std::int64_t kk = 0; kk < depth; kk += kTile) {
      wmma::load_matrix_sync(fa, a + kk, static_cast<unsigned>(lda));
      // b^T (depth, n) column-major is b (n, depth) row-major.
      wmma::load_matrix_sync(fb, b + c * ldb + kk, static_cast<unsigned>(ldb));
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + c, acc, static_cast<unsigned>(ld_out), wmma::mem_row_major);
  }
}

// acc (16, n) float row-major (ld_acc) += inv * ((hi + lo) (16, depth) x b (depth, n)), hi, lo
// row-major (ld_p), b row-major (ldb); n and depth multiples of 16.
template <typename T>
__device__ __forceinline__ void accumulate_split_product(const T* hi, const T* lo,
                                                         std::int64_t ld_p, const T* b,
                                                         std::int64_t ldb, std::int64_t n,
                                                         std::int64_t depth, float inv, float* acc,
                                                         std::int64_t ld_acc) {
  FragA<T> fa;
  FragBRow<T> fb;
  FragAcc sum, total;
  for (std::int64_t c = 0; c < n; c += kTile) {
    wmma::fill_fragment(sum, 0.0f);
    for (std::int64_t kk = 0; kk < depth; kk += kTile) {
      wmma::load_matrix_sync(fb, b + kk * ldb + c, static_cast<unsigned>(ldb));
      wmma::load_matrix_sync(fa, hi + kk, static_cast<unsigned>(ld_p));
      wmma::mma_sync(sum, fa, fb, sum);
      wmma::load_matrix_sync(fa, lo + kk, static_cast<unsigned>(ld_p));
      wmma::mma_sync(sum, fa, fb, sum);
    }
    wmma::load_matrix_sync(total, acc + c, static_cast<unsigned>(ld_acc), wmma::mem_row_major);
    for (int t = 0; t < total.num_elements; ++t) total.x[t] += sum.x[t] * inv;
    wmma::store_matrix_sync(acc + c, total, static_cast<unsigned>(ld_acc), wmma::mem_row_major);
  }
}

// ---- scalar kernels (any dtype and head dims) ----
// Blocks of kScalarThreads threads over kScalarQ queries x kScalarK keys. A score is one thread's
// dot product in C over c in order, (scale q) . k as the CPU computes it; the running sums live in
// global scratch of C, each element owned by one thread for the whole kernel (no atomics).

template <typename T>
__device__ __forceinline__ compute_t<T> dot(const T* __restrict__ a, const T* __restrict__ b,
                                            std::int64_t n, compute_t<T> a_scale) {
  using C = compute_t<T>;
  C sum = C(0);
  for (std::int64_t c = 0; c < n; ++c) sum += (to_compute(a[c]) * a_scale) * to_compute(b[c]);
  return sum;
}

}  // namespace mixprec::cuda::kernels::attention_kernels
