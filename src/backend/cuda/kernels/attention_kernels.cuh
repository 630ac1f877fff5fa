// The fused attention kernels (launched by attention.cu; see cuda/attention.h), in a header of
// their own so that a block emulation can run them on the CPU
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

// ---- forward on tensor cores ----
// One block of kTcThreads per (b, h, 64 queries); warp w owns queries 16w..16w+15 of the block.
// Per step of kFwdKeys keys: S = Q K^T (warp tile 16 x 64), masked and scaled; the online
// softmax (row maxima and sums by 16 lanes, one row each, in a fixed order; the exponentials by all
// lanes); O (float, shared) = alpha O + (P Z) V.
template <typename T>
__global__ void forward_tc_kernel(AttentionProblem p, const T* __restrict__ q,
                                  const T* __restrict__ k, const T* __restrict__ v,
                                  T* __restrict__ out, float* __restrict__ lse) {
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tq, kTcRows);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, i0 = place.first;
  const std::int64_t nq = Tq - i0 < kTcRows ? Tq - i0 : kTcRows;
  const int tid = thread_in_block(), warp = tid / kLanes, lane = tid % kLanes;
  const ForwardLayout L(D, Dv);
  unsigned char* sm = shared_memory();
  T* qs = reinterpret_cast<T*>(sm + L.q);
  T* ks = reinterpret_cast<T*>(sm + L.k);
  T* vs = reinterpret_cast<T*>(sm + L.v);
  float* s = reinterpret_cast<float*>(sm + L.s);
  T* hi = reinterpret_cast<T*>(sm + L.hi);
  T* lo = reinterpret_cast<T*>(sm + L.lo);
  float* o = reinterpret_cast<float*>(sm + L.o);
  float* m = reinterpret_cast<float*>(sm + L.m);
  float* l = reinterpret_cast<float*>(sm + L.l);
  float* alpha = reinterpret_cast<float*>(sm + L.alpha);

  load_rows(q + (b * Tq * H + h) * D, H * D, i0, Tq, kTcRows, D, qs);
  zero(o, kTcRows * Dv);
  for (std::int64_t r = tid; r < kTcRows; r += kTcThreads) {
    m[r] = negative_infinity<float>();
    l[r] = 0.0f;
  }
  block_sync();

  const float scale = static_cast<float>(p.scale);
  const std::int64_t w0 = warp * kTile;  // the warp's first row in the block
  float* sw = s + w0 * kFwdKeys;
  T* hiw = hi + w0 * kFwdKeys;
  T* low = lo + w0 * kFwdKeys;
  float* ow = o + w0 * Dv;
  const std::int64_t kend = key_end(p, i0, nq);
  for (std::int64_t j0 = 0; j0 < kend; j0 += kFwdKeys) {
    load_rows(k + (b * Tk * H + h) * D, H * D, j0, Tk, kFwdKeys, D, ks);
    load_rows(v + (b * Tk * H + h) * Dv, H * Dv, j0, Tk, kFwdKeys, Dv, vs);
    block_sync();
    product_abt(qs + w0 * D, D, ks, D, kFwdKeys, D, sw, kFwdKeys);
    warp_sync();
    for (int e = lane; e < kTile * kFwdKeys; e += kLanes) {
      const std::int64_t r = e / kFwdKeys, c = e - r * kFwdKeys;
      sw[e] = visible(p, b, h, i0 + w0 + r, j0 + c) ? sw[e] * scale : negative_infinity<float>();
    }
    warp_sync();
    if (lane < kTile) {
      const float* row = sw + lane * kFwdKeys;
      float mx = negative_infinity<float>();
      for (int t = 0; t < kFwdKeys; ++t) {
        const int c = rotated(t, lane, kFwdKeys);
        mx = row[c] > mx ? row[c] : mx;
      }
      const float m_old = m[w0 + lane];
      if (mx == negative_infinity<float>()) {  // nothing visible in this step: state unchanged
        alpha[w0 + lane] = 1.0f;
      } else {
        const float m_new = m_old > mx ? m_old : mx;
        alpha[w0 + lane] = exp(m_old - m_new);  // 0 on the first visible step (m_old = -inf)
        m[w0 + lane] = m_new;
      }
    }
    warp_sync();
    for (int e = lane; e < kTile * kFwdKeys; e += kLanes) {
      const std::int64_t r = e / kFwdKeys, c = e - r * kFwdKeys;
      const float x = sw[e];
      const float pr = x == negative_infinity<float>() ? 0.0f : exp(x - m[w0 + r]);
      sw[e] = pr;
      split(pr * keep_factor<float>(p, b, h, i0 + w0 + r, j0 + c), hiw + e, low + e);
    }
    for (int e = lane; e < kTile * Dv; e += kLanes) ow[e] *= alpha[w0 + e / Dv];
    warp_sync();
    if (lane < kTile) {  // the row sums before dropout, in one fixed (rotated) key order
      const float* row = sw + lane * kFwdKeys;
      float sum = 0.0f;
      for (int t = 0; t < kFwdKeys; ++t) sum += row[rotated(t, lane, kFwdKeys)];
      l[w0 + lane] = l[w0 + lane] * alpha[w0 + lane] + sum;
    }
    accumulate_split_product(hiw, low, kFwdKeys, vs, Dv, Dv, kFwdKeys, 1.0f, ow, Dv);
    warp_sync();
    block_sync();  // ks, vs are reloaded
  }

  for (int e = lane; e < kTile * Dv; e += kLanes) {
    const std::int64_t r = e / Dv, c = e - r * Dv, i = i0 + w0 + r;
    if (i >= Tq) continue;
    const float lr = l[w0 + r];
    const float inv = lr == 0.0f ? 0.0f : 1.0f / lr;  // a query that sees no key: zeros
    out[((b * Tq + i) * H + h) * Dv + c] = from_compute<T>(ow[e] * inv);
  }
  if (lane < kTile && i0 + w0 + lane < Tq) {
    const float lr = l[w0 + lane];
    lse[bh * Tq + i0 + w0 + lane] =
        lr == 0.0f ? negative_infinity<float>() : m[w0 + lane] + log(lr);
  }
}

// ---- backward: D_i = sum_c dO[i, c] O[i, c] in C, c in order; one thread per (b, h, i) ----
template <typename T>
__global__ void row_dots_kernel(AttentionProblem p, const T* __restrict__ dout,
                                const T* __restrict__ out, compute_t<T>* __restrict__ dr) {
  using C = compute_t<T>;
  const std::int64_t row = block_index() * kRowThreads + thread_in_block();
  if (row >= p.batch * p.heads * p.q_len) return;
  const std::int64_t bh = row / p.q_len, i = row - bh * p.q_len;
  const std::int64_t b = bh / p.heads, h = bh % p.heads, Dv = p.value_dim;
  const std::int64_t at = ((b * p.q_len + i) * p.heads + h) * Dv;
  C sum = C(0);
  for (std::int64_t c = 0; c < Dv; ++c) sum += to_compute(dout[at + c]) * to_compute(out[at + c]);
  dr[row] = sum;
}

// The score-gradient tile of one warp: for the tile's entries e = (r, c) in row-major order
// (ld columns), with query/key of each entry given by `at`, s[e] (the raw product q . k) and
// dp[e] (dO . v) become dS = P (dP Z - D) in dp, and (P Z) split into hi / lo when `want_pz`.
// Returns the warp-wide maximum |dS| (every lane the same value, after a warp_sync).
template <typename T, typename At>
__device__ __forceinline__ float score_gradients(const AttentionProblem& p, std::int64_t b,
                                                 std::int64_t h, int rows, int ld, At at,
                                                 const float* lse, const float* dr, float* s,
                                                 float* dp, bool want_pz, T* hi, T* lo,
                                                 float* amax) {
  const int tid = thread_in_block(), lane = tid % kLanes;
  const float scale = static_cast<float>(p.scale);
  float mx = 0.0f;
  for (int e = lane; e < rows * ld; e += kLanes) {
    const std::int64_t r = e / ld, c = e - r * ld;
    std::int64_t i = 0, j = 0, qi = 0;  // query, key, the query's slot in lse / dr
    at(r, c, &i, &j, &qi);
    float pz = 0.0f, ds = 0.0f;
    if (visible(p, b, h, i, j)) {
      const float pr = exp(s[e] * scale - lse[qi]);
      const float z = keep_factor<float>(p, b, h, i, j);
      pz = pr * z;
      ds = pr * (dp[e] * z - dr[qi]);
    }
    if (want_pz) split(pz, hi + e, lo + e);
    dp[e] = ds;
    const float a = ds < 0.0f ? -ds : ds;
    mx = a > mx || a != a ? a : mx;  // NaN wins: the scaling then stays 1
  }
  amax[tid] = mx;
  warp_sync();
  const int first = tid - lane;
  float tmax = 0.0f;
  for (int t = 0; t < kLanes; ++t) {
    const float a = amax[first + t];
    tmax = a > tmax || a != a ? a : tmax;
  }
  return tmax;
}

// ---- dK, dV on tensor cores ----
// One block per (b, h, 64 keys); warp w owns keys 16w..16w+15 and accumulates their dK, dV rows
// (float, shared) over every query step of kDkvQueries queries in order: S^T = K Q^T and
// dP^T = V dO^T (warp tiles 16 x 32), dV += (P Z)^T dO, dK += dS^T Q (scaled at the end).
template <typename T>
__global__ void dkdv_tc_kernel(AttentionProblem p, const T* __restrict__ dout,
                               const T* __restrict__ q, const T* __restrict__ k,
                               const T* __restrict__ v, const float* __restrict__ lse,
                               const float* __restrict__ dr, T* __restrict__ dk,
                               T* __restrict__ dv) {
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tk, kTcRows);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, j0 = place.first;
  const int tid = thread_in_block(), warp = tid / kLanes;
  const DkvLayout L(D, Dv);
  unsigned char* sm = shared_memory();
  T* ks = reinterpret_cast<T*>(sm + L.k);
  T* vs = reinterpret_cast<T*>(sm + L.v);
  T* qs = reinterpret_cast<T*>(sm + L.q);
  T* dos = reinterpret_cast<T*>(sm + L.dout);
  float* s = reinterpret_cast<float*>(sm + L.s);
  float* dp = reinterpret_cast<float*>(sm + L.dp);
  T* hi = reinterpret_cast<T*>(sm + L.hi);
  T* lo = reinterpret_cast<T*>(sm + L.lo);
  float* dks = reinterpret_cast<float*>(sm + L.dk);
  float* dvs = reinterpret_cast<float*>(sm + L.dv);
  float* lse_s = reinterpret_cast<float*>(sm + L.lse);
  float* dr_s = reinterpret_cast<float*>(sm + L.dr);
  float* amax = reinterpret_cast<float*>(sm + L.amax);

  load_rows(k + (b * Tk * H + h) * D, H * D, j0, Tk, kTcRows, D, ks);
  load_rows(v + (b * Tk * H + h) * Dv, H * Dv, j0, Tk, kTcRows, Dv, vs);
  zero(dks, kTcRows * D);
  zero(dvs, kTcRows * Dv);

  const std::int64_t w0 = warp * kTile;
  float* sw = s + w0 * kDkvQueries;
  float* dpw = dp + w0 * kDkvQueries;
  T* hiw = hi + w0 * kDkvQueries;
  T* low = lo + w0 * kDkvQueries;
  const std::int64_t start = query_begin(p, j0) / kDkvQueries * kDkvQueries;
  for (std::int64_t i0 = start; i0 < Tq; i0 += kDkvQueries) {
    block_sync();  // the previous step's readers of qs, dos are done (and the loads above)
    load_rows(q + (b * Tq * H + h) * D, H * D, i0, Tq, kDkvQueries, D, qs);
    load_rows(dout + (b * Tq * H + h) * Dv, H * Dv, i0, Tq, kDkvQueries, Dv, dos);
    for (std::int64_t r = tid; r < kDkvQueries; r += kTcThreads) {
      const bool in = i0 + r < Tq;
      lse_s[r] = in ? lse[bh * Tq + i0 + r] : 0.0f;
      dr_s[r] = in ? dr[bh * Tq + i0 + r] : 0.0f;
    }
    block_sync();
    product_abt(ks + w0 * D, D, qs, D, kDkvQueries, D, sw, kDkvQueries);
    product_abt(vs + w0 * Dv, Dv, dos, Dv, kDkvQueries, Dv, dpw, kDkvQueries);
    warp_sync();
    // Entry (r, c) of the warp's tiles: key j0 + w0 + r, query i0 + c.
    const float tmax = score_gradients<T>(
        p, b, h, kTile, kDkvQueries,
        [&](std::int64_t r, std::int64_t c, std::int64_t* i, std::int64_t* j, std::int64_t* qi) {
          *i = i0 + c, *j = j0 + w0 + r, *qi = c;
        },
        lse_s, dr_s, sw, dpw, true, hiw, low, amax);
    accumulate_split_product(hiw, low, kDkvQueries, dos, Dv, Dv, kDkvQueries, 1.0f, dvs + w0 * Dv,
                             Dv);
    warp_sync();         // hi / lo are rewritten with dS
    if (tmax != 0.0f) {  // NaN included: it must reach dK
      const float sc = power_of_two_scale(tmax);
      for (int e = tid % kLanes; e < kTile * kDkvQueries; e += kLanes) {
        split(dpw[e] * sc, hiw + e, low + e);
      }
      warp_sync();
      accumulate_split_product(hiw, low, kDkvQueries, qs, D, D, kDkvQueries, 1.0f / sc,
                               dks + w0 * D, D);
    }
    warp_sync();
  }
  block_sync();
  const float scale = static_cast<float>(p.scale);
  for (int e = tid; e < kTcRows * D; e += kTcThreads) {
    const std::int64_t r = e / D, c = e - r * D;
    if (j0 + r < Tk) dk[((b * Tk + j0 + r) * H + h) * D + c] = from_compute<T>(dks[e] * scale);
  }
  for (int e = tid; e < kTcRows * Dv; e += kTcThreads) {
    const std::int64_t r = e / Dv, c = e - r * Dv;
    if (j0 + r < Tk) dv[((b * Tk + j0 + r) * H + h) * Dv + c] = from_compute<T>(dvs[e]);
  }
}

// ---- dQ on tensor cores ----
// One block per (b, h, 64 queries); warp w owns queries 16w..16w+15 and accumulates their dQ rows
// (float, shared) over every key step of kDqKeys keys in order: S = Q K^T, dP = dO V^T (warp
// tiles 16 x 64), dQ += dS K (scaled at the end).
template <typename T>
__global__ void dq_tc_kernel(AttentionProblem p, const T* __restrict__ dout,
                             const T* __restrict__ q, const T* __restrict__ k,
                             const T* __restrict__ v, const float* __restrict__ lse,
                             const float* __restrict__ dr, T* __restrict__ dq) {
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tq, kTcRows);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, i0 = place.first;
  const std::int64_t nq = Tq - i0 < kTcRows ? Tq - i0 : kTcRows;
  const int tid = thread_in_block(), warp = tid / kLanes;
  const DqLayout L(D, Dv);
  unsigned char* sm = shared_memory();
  T* qs = reinterpret_cast<T*>(sm + L.q);
  T* dos = reinterpret_cast<T*>(sm + L.dout);
  T* ks = reinterpret_cast<T*>(sm + L.k);
  T* vs = reinterpret_cast<T*>(sm + L.v);
  float* s = reinterpret_cast<float*>(sm + L.s);
  float* dp = reinterpret_cast<float*>(sm + L.dp);
  T* hi = reinterpret_cast<T*>(sm + L.hi);
  T* lo = reinterpret_cast<T*>(sm + L.lo);
  float* dqs = reinterpret_cast<float*>(sm + L.dq);
  float* lse_s = reinterpret_cast<float*>(sm + L.lse);
  float* dr_s = reinterpret_cast<float*>(sm + L.dr);
  float* amax = reinterpret_cast<float*>(sm + L.amax);

  load_rows(q + (b * Tq * H + h) * D, H * D, i0, Tq, kTcRows, D, qs);
  load_rows(dout + (b * Tq * H + h) * Dv, H * Dv, i0, Tq, kTcRows, Dv, dos);
  zero(dqs, kTcRows * D);
  for (std::int64_t r = tid; r < kTcRows; r += kTcThreads) {
    const bool in = i0 + r < Tq;
    lse_s[r] = in ? lse[bh * Tq + i0 + r] : 0.0f;
    dr_s[r] = in ? dr[bh * Tq + i0 + r] : 0.0f;
  }

  const std::int64_t w0 = warp * kTile;
  float* sw = s + w0 * kDqKeys;
  float* dpw = dp + w0 * kDqKeys;
  T* hiw = hi + w0 * kDqKeys;
  T* low = lo + w0 * kDqKeys;
  const std::int64_t kend = key_end(p, i0, nq);
  for (std::int64_t j0 = 0; j0 < kend; j0 += kDqKeys) {
    block_sync();  // the previous step's readers of ks, vs are done (and the loads above)
    load_rows(k + (b * Tk * H + h) * D, H * D, j0, Tk, kDqKeys, D, ks);
    load_rows(v + (b * Tk * H + h) * Dv, H * Dv, j0, Tk, kDqKeys, Dv, vs);
    block_sync();
    product_abt(qs + w0 * D, D, ks, D, kDqKeys, D, sw, kDqKeys);
    product_abt(dos + w0 * Dv, Dv, vs, Dv, kDqKeys, Dv, dpw, kDqKeys);
    warp_sync();
    // Entry (r, c) of the warp's tiles: query i0 + w0 + r, key j0 + c.
    const float tmax = score_gradients<T>(
        p, b, h, kTile, kDqKeys,
        [&](std::int64_t r, std::int64_t c, std::int64_t* i, std::int64_t* j, std::int64_t* qi) {
          *i = i0 + w0 + r, *j = j0 + c, *qi = w0 + r;
        },
        lse_s, dr_s, sw, dpw, false, hiw, low, amax);
    if (tmax != 0.0f) {  // NaN included: it must reach dQ
      const float sc = power_of_two_scale(tmax);
      for (int e = tid % kLanes; e < kTile * kDqKeys; e += kLanes) {
        split(dpw[e] * sc, hiw + e, low + e);
      }
      warp_sync();
      accumulate_split_product(hiw, low, kDqKeys, ks, D, D, kDqKeys, 1.0f / sc, dqs + w0 * D, D);
    }
    warp_sync();
  }
  block_sync();
  const float scale = static_cast<float>(p.scale);
  for (int e = tid; e < kTcRows * D; e += kTcThreads) {
    const std::int64_t r = e / D, c = e - r * D;
    if (i0 + r < Tq) dq[((b * Tq + i0 + r) * H + h) * D + c] = from_compute<T>(dqs[e] * scale);
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

// Forward: per key step, the block's scores tile, then 16 threads (one per query) update the
// online softmax in a fixed order, then every (query, column) of the accumulator adds its row of
// P Z times V in key order.
template <typename T>
__global__ void forward_scalar_kernel(AttentionProblem p, const T* __restrict__ q,
                                      const T* __restrict__ k, const T* __restrict__ v,
                                      T* __restrict__ out, compute_t<T>* __restrict__ lse,
                                      compute_t<T>* __restrict__ acc) {
  using C = compute_t<T>;
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tq, kScalarQ);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, i0 = place.first;
  const std::int64_t nq = Tq - i0 < kScalarQ ? Tq - i0 : kScalarQ;
  const int tid = thread_in_block();
  C* s = reinterpret_cast<C*>(shared_memory());  // (kScalarQ, kScalarK)
  C* m = s + 2 * kScalarQ * kScalarK;
  C* l = m + kScalarQ;
  C* alpha = l + kScalarQ;
  const T* qh = q + (b * Tq * H + h) * D;
  const T* kh = k + (b * Tk * H + h) * D;
  const T* vh = v + (b * Tk * H + h) * Dv;
  C* accb = acc + (bh * Tq + i0) * Dv;
  for (int e = tid; e < nq * Dv; e += kScalarThreads) accb[e] = C(0);
  if (tid < kScalarQ) m[tid] = negative_infinity<C>(), l[tid] = C(0);
  const C scale = static_cast<C>(p.scale);
  const std::int64_t kend = key_end(p, i0, nq);
  for (std::int64_t j0 = 0; j0 < kend; j0 += kScalarK) {
    block_sync();  // the previous step's readers of s are done (and the initialisation)
    for (int e = tid; e < kScalarQ * kScalarK; e += kScalarThreads) {
      const std::int64_t r = e / kScalarK, c = e - r * kScalarK, i = i0 + r, j = j0 + c;
      s[e] = visible(p, b, h, i, j) ? dot(qh + i * H * D, kh + j * H * D, D, scale)
                                    : negative_infinity<C>();
    }
    block_sync();
    if (tid < kScalarQ) {
      C* row = s + tid * kScalarK;
      C mx = negative_infinity<C>();
      for (int t = 0; t < kScalarK; ++t) {
        const int c = rotated(t, tid, kScalarK);
        mx = row[c] > mx ? row[c] : mx;
      }
      if (mx == negative_infinity<C>()) {  // nothing visible: P = 0, the state unchanged
        for (int c = 0; c < kScalarK; ++c) row[c] = C(0);
        alpha[tid] = C(1);
      } else {
        const C m_new = m[tid] > mx ? m[tid] : mx;
        const C a = exp(m[tid] - m_new);
        C sum = C(0);
        for (int t = 0; t < kScalarK; ++t) {
          const int c = rotated(t, tid, kScalarK);
          const C pr = row[c] == negative_infinity<C>() ? C(0) : exp(row[c] - m_new);
          sum += pr;
          row[c] = pr * keep_factor<C>(p, b, h, i0 + tid, j0 + c);
        }
        l[tid] = l[tid] * a + sum;
        m[tid] = m_new;
        alpha[tid] = a;
      }
    }
    block_sync();
    const std::int64_t nk = Tk - j0 < kScalarK ? Tk - j0 : kScalarK;
    for (int e = tid; e < nq * Dv; e += kScalarThreads) {
      const std::int64_t r = e / Dv, c = e - r * Dv;
      const C* prow = s + r * kScalarK;
      C o = accb[e] * alpha[r];
      for (std::int64_t jj = 0; jj < nk; ++jj)
        o += prow[jj] * to_compute(vh[(j0 + jj) * H * Dv + c]);
      accb[e] = o;
    }
  }
  block_sync();
  for (int e = tid; e < nq * Dv; e += kScalarThreads) {
    const std::int64_t r = e / Dv, c = e - r * Dv;
    const C inv = l[r] == C(0) ? C(0) : C(1) / l[r];
    out[((b * Tq + i0 + r) * H + h) * Dv + c] = from_compute<T>(accb[e] * inv);
  }
  if (tid < nq) {
    lse[bh * Tq + i0 + tid] = l[tid] == C(0) ? negative_infinity<C>() : m[tid] + log(l[tid]);
  }
}

// P Z and dS = P (dP Z - D) of query i, key j (zeros when i does not see j).
template <typename T>
__device__ __forceinline__ void scalar_score_gradient(
    const AttentionProblem& p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j,
    const T* qh, const T* kh, const T* vh, const T* doh, const compute_t<T>* lse,
    const compute_t<T>* dr, compute_t<T>* pz, compute_t<T>* ds) {
  using C = compute_t<T>;
  const std::int64_t H = p.heads, D = p.head_dim, Dv = p.value_dim;
  *pz = C(0), *ds = C(0);
  if (!visible(p, b, h, i, j)) return;
  const C pr = exp(dot(qh + i * H * D, kh + j * H * D, D, static_cast<C>(p.scale)) - lse[i]);
  const C dpv = dot(doh + i * H * Dv, vh + j * H * Dv, Dv, C(1));
  const C z = keep_factor<C>(p, b, h, i, j);
  *pz = pr * z;
  *ds = pr * (dpv * z - dr[i]);
}

// dK, dV: one block per (b, h, kScalarK keys); per query step the (P Z, dS) tiles, then every
// (key, column) of the accumulators adds its column of the tiles times dO / (scale q) in query
// order.
template <typename T>
__global__ void dkdv_scalar_kernel(AttentionProblem p, const T* __restrict__ dout,
                                   const T* __restrict__ q, const T* __restrict__ k,
                                   const T* __restrict__ v, const compute_t<T>* __restrict__ lse,
                                   const compute_t<T>* __restrict__ dr,
                                   compute_t<T>* __restrict__ dk_acc,
                                   compute_t<T>* __restrict__ dv_acc, T* __restrict__ dk,
                                   T* __restrict__ dv) {
  using C = compute_t<T>;
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tk, kScalarK);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, j0 = place.first;
  const std::int64_t nk = Tk - j0 < kScalarK ? Tk - j0 : kScalarK;
  const int tid = thread_in_block();
  C* pz = reinterpret_cast<C*>(shared_memory());  // (kScalarQ, kScalarK)
  C* ds = pz + kScalarQ * kScalarK;
  const T* qh = q + (b * Tq * H + h) * D;
  const T* kh = k + (b * Tk * H + h) * D;
  const T* vh = v + (b * Tk * H + h) * Dv;
  const T* doh = dout + (b * Tq * H + h) * Dv;
  const C* lh = lse + bh * Tq;
  const C* drh = dr + bh * Tq;
  C* dka = dk_acc + (bh * Tk + j0) * D;
  C* dva = dv_acc + (bh * Tk + j0) * Dv;
  for (int e = tid; e < nk * D; e += kScalarThreads) dka[e] = C(0);
  for (int e = tid; e < nk * Dv; e += kScalarThreads) dva[e] = C(0);
  const C scale = static_cast<C>(p.scale);
  for (std::int64_t i0 = query_begin(p, j0) / kScalarQ * kScalarQ; i0 < Tq; i0 += kScalarQ) {
    block_sync();
    for (int e = tid; e < kScalarQ * kScalarK; e += kScalarThreads) {
      const std::int64_t r = e / kScalarK, c = e - r * kScalarK;
      scalar_score_gradient(p, b, h, i0 + r, j0 + c, qh, kh, vh, doh, lh, drh, pz + e, ds + e);
    }
    block_sync();
    const std::int64_t nq = Tq - i0 < kScalarQ ? Tq - i0 : kScalarQ;
    for (int e = tid; e < nk * Dv; e += kScalarThreads) {
      const std::int64_t j = e / Dv, c = e - j * Dv;
      C a = dva[e];
      for (std::int64_t r = 0; r < nq; ++r) {
        a += pz[r * kScalarK + j] * to_compute(doh[(i0 + r) * H * Dv + c]);
      }
      dva[e] = a;
    }
    for (int e = tid; e < nk * D; e += kScalarThreads) {
      const std::int64_t j = e / D, c = e - j * D;
      C a = dka[e];
      for (std::int64_t r = 0; r < nq; ++r) {
        a += ds[r * kScalarK + j] * (to_compute(qh[(i0 + r) * H * D + c]) * scale);
      }
      dka[e] = a;
    }
  }
  // Each accumulator element was written by the thread that writes it out: no sync needed.
  for (int e = tid; e < nk * D; e += kScalarThreads) {
    const std::int64_t j = e / D, c = e - j * D;
    dk[((b * Tk + j0 + j) * H + h) * D + c] = from_compute<T>(dka[e]);
  }
  for (int e = tid; e < nk * Dv; e += kScalarThreads) {
    const std::int64_t j = e / Dv, c = e - j * Dv;
    dv[((b * Tk + j0 + j) * H + h) * Dv + c] = from_compute<T>(dva[e]);
  }
}

// dQ: one block per (b, h, kScalarQ queries); per key step the dS tile, then every (query,
// column) of the accumulator adds its row of dS times K in key order; scaled at the end.
template <typename T>
__global__ void dq_scalar_kernel(AttentionProblem p, const T* __restrict__ dout,
                                 const T* __restrict__ q, const T* __restrict__ k,
                                 const T* __restrict__ v, const compute_t<T>* __restrict__ lse,
                                 const compute_t<T>* __restrict__ dr,
                                 compute_t<T>* __restrict__ dq_acc, T* __restrict__ dq) {
  using C = compute_t<T>;
  const std::int64_t H = p.heads, Tq = p.q_len, Tk = p.k_len;
  const int D = static_cast<int>(p.head_dim), Dv = static_cast<int>(p.value_dim);
  const BlockPlace place = block_place(p, Tq, kScalarQ);
  const std::int64_t bh = place.bh, b = place.b, h = place.h, i0 = place.first;
  const std::int64_t nq = Tq - i0 < kScalarQ ? Tq - i0 : kScalarQ;
  const int tid = thread_in_block();
  C* pz = reinterpret_cast<C*>(shared_memory());  // (kScalarQ, kScalarK), unused
  C* ds = pz + kScalarQ * kScalarK;
  const T* qh = q + (b * Tq * H + h) * D;
  const T* kh = k + (b * Tk * H + h) * D;
  const T* vh = v + (b * Tk * H + h) * Dv;
  const T* doh = dout + (b * Tq * H + h) * Dv;
  C* dqa = dq_acc + (bh * Tq + i0) * D;
  for (int e = tid; e < nq * D; e += kScalarThreads) dqa[e] = C(0);
  const std::int64_t kend = key_end(p, i0, nq);
  for (std::int64_t j0 = 0; j0 < kend; j0 += kScalarK) {
    block_sync();
    for (int e = tid; e < kScalarQ * kScalarK; e += kScalarThreads) {
      const std::int64_t r = e / kScalarK, c = e - r * kScalarK;
      scalar_score_gradient(p, b, h, i0 + r, j0 + c, qh, kh, vh, doh, lse + bh * Tq, dr + bh * Tq,
                            pz + e, ds + e);
    }
    block_sync();
    const std::int64_t nk = Tk - j0 < kScalarK ? Tk - j0 : kScalarK;
    for (int e = tid; e < nq * D; e += kScalarThreads) {
      const std::int64_t r = e / D, c = e - r * D;
      C a = dqa[e];
      for (std::int64_t jj = 0; jj < nk; ++jj) {
        a += ds[r * kScalarK + jj] * to_compute(kh[(j0 + jj) * H * D + c]);
      }
      dqa[e] = a;
    }
  }
  const C scale = static_cast<C>(p.scale);
  for (int e = tid; e < nq * D; e += kScalarThreads) {
    const std::int64_t r = e / D, c = e - r * D;
    dq[((b * Tq + i0 + r) * H + h) * D + c] = from_compute<T>(dqa[e] * scale);
  }
}

}  // namespace mixprec::cuda::kernels::attention_kernels
