// Fused scaled-dot-product attention on the CPU, flash-attention style (Dao et al., 2022):
//
// forward, per (batch, head, block of kBlockQ queries), OpenMP over those units:
//   for each block of kBlockK keys the query can see:
//     S = (scale * Q) K^T                      (kBlockQ, kBlockK), masked entries -inf
//     m' = max(m, rowmax S); alpha = exp(m - m'); P = exp(S - m')
//     l = alpha l + rowsum P;  O = alpha O + (P * Z) V      (Z: the dropout keep factors)
//   out = O / l, lse = m + log l (the only things kept for the backward).
// backward, per (batch, head), OpenMP over those units (each unit's sums run in one fixed order,
// so the gradients are the same bits for any thread count):
//   Dr = rowsum(dO * out) per query; then for each key block, for each query block that sees it:
//     P = exp(S - lse) recomputed;  dV += (P Z)^T dO;  dP = (dO V^T) Z;  dS = P (dP - Dr)
//     dK += dS^T (scale Q);  dQ += dS K   (dQ scaled at the end)
//   The per-thread scratch is O(Tq + Tk) rows of one head; the Tq x Tk matrix is never held.
//
// Every value is computed in C = float (float32 and the 16-bit dtypes: read widened, rounded once
// on store) or double (float64). The block products are our own register-blocked loops
// (gemm_acc): 4 rows x 16 columns of float accumulators in 8 AVX2 registers (GCC vectors), the
// row widths padded to 16 with zeros so that no product needs a tail.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/target_clones.h"
#include "backend/cpu/vector_math.h"
#include "core/counter_hash.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors never cross a call (all inlined)

constexpr std::int64_t kBlockQ = 64;  // queries per block
constexpr std::int64_t kBlockK = 64;  // keys per block (a multiple of 16: S rows need no padding)

// Row widths are padded to a multiple of kPad so that the float product runs whole vectors.
template <typename C>
constexpr std::int64_t kPad = std::is_same_v<C, float> ? 16 : 1;

constexpr std::int64_t round_up(std::int64_t n, std::int64_t p) { return (n + p - 1) / p * p; }

using Vec8 = float __attribute__((vector_size(32)));

MIXPREC_CPU_ALWAYS_INLINE Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
MIXPREC_CPU_ALWAYS_INLINE void store8(float* p, const Vec8& v) { std::memcpy(p, &v, sizeof v); }

// c (M, N) += sum over k < K of A(m, k) * b (K, N), A(m, k) = a[m * ars + k * aks], rows of b and
// c ldb and ldc apart. For float N is a multiple of 16.
template <typename C>
MIXPREC_CPU_ALWAYS_INLINE void gemm_acc(std::int64_t M, std::int64_t N, std::int64_t K, const C* a,
                                        std::int64_t ars, std::int64_t aks, const C* b,
                                        std::int64_t ldb, C* c, std::int64_t ldc) {
  if constexpr (std::is_same_v<C, float>) {
    std::int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      const float* a0 = a + m * ars;
      const float* a1 = a0 + ars;
      const float* a2 = a1 + ars;
      const float* a3 = a2 + ars;
      float* c0 = c + m * ldc;
      float* c1 = c0 + ldc;
      float* c2 = c1 + ldc;
      float* c3 = c2 + ldc;
      for (std::int64_t n = 0; n < N; n += 16) {
        Vec8 x00 = load8(c0 + n), x01 = load8(c0 + n + 8);
        Vec8 x10 = load8(c1 + n), x11 = load8(c1 + n + 8);
        Vec8 x20 = load8(c2 + n), x21 = load8(c2 + n + 8);
        Vec8 x30 = load8(c3 + n), x31 = load8(c3 + n + 8);
        const float* bn = b + n;
        for (std::int64_t k = 0; k < K; ++k) {
          const Vec8 b0 = load8(bn + k * ldb), b1 = load8(bn + k * ldb + 8);
          const float s0 = a0[k * aks], s1 = a1[k * aks], s2 = a2[k * aks], s3 = a3[k * aks];
          x00 += s0 * b0;
          x01 += s0 * b1;
          x10 += s1 * b0;
          x11 += s1 * b1;
          x20 += s2 * b0;
          x21 += s2 * b1;
          x30 += s3 * b0;
          x31 += s3 * b1;
        }
        store8(c0 + n, x00), store8(c0 + n + 8, x01);
        store8(c1 + n, x10), store8(c1 + n + 8, x11);
        store8(c2 + n, x20), store8(c2 + n + 8, x21);
        store8(c3 + n, x30), store8(c3 + n + 8, x31);
      }
    }
    for (; m < M; ++m) {
      const float* a0 = a + m * ars;
      float* c0 = c + m * ldc;
      for (std::int64_t n = 0; n < N; n += 16) {
        Vec8 x00 = load8(c0 + n), x01 = load8(c0 + n + 8);
        const float* bn = b + n;
        for (std::int64_t k = 0; k < K; ++k) {
          const float s0 = a0[k * aks];
          x00 += s0 * load8(bn + k * ldb);
          x01 += s0 * load8(bn + k * ldb + 8);
        }
        store8(c0 + n, x00), store8(c0 + n + 8, x01);
      }
    }
  } else {
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::int64_t k = 0; k < K; ++k) {
        const C s = a[m * ars + k * aks];
        for (std::int64_t n = 0; n < N; ++n) c[m * ldc + n] += s * b[k * ldb + n];
      }
    }
  }
}

template <typename C>
MIXPREC_CPU_ALWAYS_INLINE C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return exp_float(x);
  } else {
    return std::exp(x);
  }
}

// The bool mask (batch, heads, q_len, k_len) through its strides; p null: no mask.
struct MaskView {
  const bool* p = nullptr;
  std::int64_t sb = 0, sh = 0, si = 0, sj = 0;
};

MaskView mask_view(const Tensor& mask) {
  MaskView m;
  if (!mask.defined()) return m;
  m.p = static_cast<const bool*>(mask.data_ptr());
  const auto& s = mask.strides();
  m.sb = s[0], m.sh = s[1], m.si = s[2], m.sj = s[3];
  return m;
}

// The number of leading keys of block j0 (nk keys) that query i may see under the causal rule
// (all nk without it).
MIXPREC_CPU_ALWAYS_INLINE std::int64_t causal_limit(const AttentionGeometry& g, std::int64_t i,
                                                    std::int64_t j0, std::int64_t nk) {
  if (!g.causal) return nk;
  return std::clamp<std::int64_t>(i + (g.k_len - g.q_len) + 1 - j0, 0, nk);
}

// Rows [r0, r0 + n) of a (rows, width) slice with row stride `stride` of T, into dst (n, ld) of C,
// columns from width to ld zeroed; scaled by `scale`.
template <typename T, typename C>
MIXPREC_CPU_ALWAYS_INLINE void load_rows(const T* src, std::int64_t stride, std::int64_t n,
                                         std::int64_t width, C scale, C* dst, std::int64_t ld) {
  for (std::int64_t r = 0; r < n; ++r) {
    const T* s = src + r * stride;
    C* d = dst + r * ld;
    for (std::int64_t c = 0; c < width; ++c) d[c] = core::load_as<C>(s[c]) * scale;
    for (std::int64_t c = width; c < ld; ++c) d[c] = C(0);
  }
}

// The same rows transposed: dst (ld_rows, n_cols = kBlockK) with dst[c * kBlockK + r]; rows n and
// beyond, and columns from width on, zeroed.
template <typename T, typename C>
MIXPREC_CPU_ALWAYS_INLINE void load_rows_transposed(const T* src, std::int64_t stride,
                                                    std::int64_t n, std::int64_t width,
                                                    std::int64_t padded_width, C* dst) {
  std::fill(dst, dst + padded_width * kBlockK, C(0));
  for (std::int64_t r = 0; r < n; ++r) {
    const T* s = src + r * stride;
    for (std::int64_t c = 0; c < width; ++c) dst[c * kBlockK + r] = core::load_as<C>(s[c]);
  }
}

// The scores of one block made probabilities' inputs: entries a query may not see are -inf
// (causal rule, mask, keys beyond the block's nk).
template <typename C>
MIXPREC_CPU_ALWAYS_INLINE void mask_scores(const AttentionGeometry& g, const MaskView& mask,
                                           std::int64_t b, std::int64_t h, std::int64_t i0,
                                           std::int64_t nq, std::int64_t j0, std::int64_t nk,
                                           C* s) {
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  for (std::int64_t r = 0; r < nq; ++r) {
    C* row = s + r * kBlockK;
    const std::int64_t lim = causal_limit(g, i0 + r, j0, nk);
    if (mask.p != nullptr) {
      const bool* m = mask.p + b * mask.sb + h * mask.sh + (i0 + r) * mask.si + j0 * mask.sj;
      for (std::int64_t j = 0; j < lim; ++j) {
        if (!m[j * mask.sj]) row[j] = kNegInf;
      }
    }
    for (std::int64_t j = lim; j < kBlockK; ++j) row[j] = kNegInf;
  }
}

// Multiplies the kept probabilities of a block by keep_scale and zeroes the dropped ones.
template <typename C>
MIXPREC_CPU_ALWAYS_INLINE void apply_dropout(const AttentionGeometry& g, std::int64_t b,
                                             std::int64_t h, std::int64_t i0, std::int64_t nq,
                                             std::int64_t j0, std::int64_t nk, C* p) {
  const C keep = static_cast<C>(g.keep_scale);
  for (std::int64_t r = 0; r < nq; ++r) {
    const std::uint64_t base_index =
        static_cast<std::uint64_t>(((b * g.heads + h) * g.q_len + i0 + r) * g.k_len + j0);
    C* row = p + r * kBlockK;
    for (std::int64_t j = 0; j < nk; ++j) {
      const bool kept = core::counter_keeps(
          g.dropout_base, base_index + static_cast<std::uint64_t>(j), g.dropout_threshold);
      row[j] = kept ? row[j] * keep : C(0);
    }
  }
}

// ---- forward ----

template <typename T, typename C>
MIXPREC_CPU_ALWAYS_INLINE void forward_unit(const T* q, const T* k, const T* v,
                                            const MaskView& mask, const AttentionGeometry& g,
                                            std::int64_t unit, T* out, C* lse, C* buf) {
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  const std::int64_t H = g.heads, D = g.head_dim, Dv = g.value_dim;
  const std::int64_t Dp = round_up(D, kPad<C>), Dvp = round_up(Dv, kPad<C>);
  const std::int64_t qblocks = (g.q_len + kBlockQ - 1) / kBlockQ;
  const std::int64_t bh = unit / qblocks, b = bh / H, h = bh % H;
  const std::int64_t i0 = (unit % qblocks) * kBlockQ;
  const std::int64_t nq = std::min(kBlockQ, g.q_len - i0);

  C* qs = buf;                   // (kBlockQ, Dp): scale * q
  C* kt = qs + kBlockQ * Dp;     // (Dp, kBlockK): k^T
  C* vs = kt + Dp * kBlockK;     // (kBlockK, Dvp)
  C* s = vs + kBlockK * Dvp;     // (kBlockQ, kBlockK): scores, then probabilities
  C* o = s + kBlockQ * kBlockK;  // (kBlockQ, Dvp): unnormalised output
  C* m = o + kBlockQ * Dvp;      // (kBlockQ): running maxima
  C* l = m + kBlockQ;            // (kBlockQ): running sums

  load_rows(q + ((b * g.q_len + i0) * H + h) * D, H * D, nq, D, static_cast<C>(g.scale), qs, Dp);
  std::fill(o, o + kBlockQ * Dvp, C(0));
  std::fill(m, m + kBlockQ, kNegInf);
  std::fill(l, l + kBlockQ, C(0));

  // Keys beyond the last one the block's last query sees are skipped whole.
  const std::int64_t kend =
      g.causal ? std::clamp<std::int64_t>(i0 + nq + (g.k_len - g.q_len), 0, g.k_len) : g.k_len;
  for (std::int64_t j0 = 0; j0 < kend; j0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, g.k_len - j0);
    load_rows_transposed(k + ((b * g.k_len + j0) * H + h) * D, H * D, nk, D, Dp, kt);
    load_rows(v + ((b * g.k_len + j0) * H + h) * Dv, H * Dv, nk, Dv, C(1), vs, Dvp);
    std::fill(s, s + nq * kBlockK, C(0));
    gemm_acc<C>(nq, kBlockK, Dp, qs, Dp, 1, kt, kBlockK, s, kBlockK);
    mask_scores(g, mask, b, h, i0, nq, j0, nk, s);
    for (std::int64_t r = 0; r < nq; ++r) {
      C* row = s + r * kBlockK;
      C mx = kNegInf;
#pragma omp simd reduction(max : mx)
      for (std::int64_t j = 0; j < kBlockK; ++j) mx = row[j] > mx ? row[j] : mx;
      if (mx == kNegInf) {  // nothing visible in this block: P = 0, the state unchanged
        std::fill(row, row + kBlockK, C(0));
        continue;
      }
      const C mnew = m[r] > mx ? m[r] : mx;
      const C alpha = exp_c(m[r] - mnew);  // 0 on the first visible block (m = -inf)
      C sum = 0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t j = 0; j < kBlockK; ++j) {
        const C p = row[j] == kNegInf ? C(0) : exp_c(row[j] - mnew);
        row[j] = p;
        sum += p;
      }
      l[r] = l[r] * alpha + sum;
      m[r] = mnew;
      if (alpha != C(1)) {
        C* orow = o + r * Dvp;
#pragma omp simd
        for (std::int64_t c = 0; c < Dvp; ++c) orow[c] *= alpha;
      }
    }
    if (g.dropout) apply_dropout(g, b, h, i0, nq, j0, nk, s);
    gemm_acc<C>(nq, Dvp, nk, s, kBlockK, 1, vs, Dvp, o, Dvp);
  }

  for (std::int64_t r = 0; r < nq; ++r) {
    T* dst = out + ((b * g.q_len + i0 + r) * H + h) * Dv;
    const C* orow = o + r * Dvp;
    const bool none = l[r] == C(0);  // the query sees no key: zeros
    const C inv = none ? C(0) : C(1) / l[r];
    for (std::int64_t c = 0; c < Dv; ++c) dst[c] = core::store_as<T>(orow[c] * inv);
    lse[bh * g.q_len + i0 + r] = none ? kNegInf : m[r] + std::log(l[r]);
  }
}

template <typename T, typename C>
MIXPREC_CPU_CLONES void forward_range(const T* q, const T* k, const T* v, const MaskView& mask,
                                      const AttentionGeometry& g, std::int64_t first,
                                      std::int64_t last, T* out, C* lse, C* buf) {
  for (std::int64_t u = first; u < last; ++u)
    forward_unit<T, C>(q, k, v, mask, g, u, out, lse, buf);
}

std::size_t forward_scratch(const AttentionGeometry& g, std::int64_t pad) {
  const std::int64_t Dp = round_up(g.head_dim, pad), Dvp = round_up(g.value_dim, pad);
  return static_cast<std::size_t>(kBlockQ * Dp + Dp * kBlockK + kBlockK * Dvp + kBlockQ * kBlockK +
                                  kBlockQ * Dvp + 2 * kBlockQ);
}

// Runs body(first, last, buf) over [0, units) split in contiguous ranges, one per thread, each
// with its own scratch of `scratch` values of C. Small problems stay on the calling thread.
template <typename C, typename Body>
void run_units(std::int64_t units, std::size_t scratch, bool parallel, Body body) {
  if (!parallel || units < 2) {
    std::vector<C> buf(scratch);
    body(0, units, buf.data());
    return;
  }
#pragma omp parallel
  {
    std::vector<C> buf(scratch);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < units; ++u) body(u, u + 1, buf.data());
  }
}

// Work below which a call stays on one thread: about 2^18 multiply-adds.
bool worth_parallel(const AttentionGeometry& g) {
  const double work = static_cast<double>(g.batch * g.heads) * static_cast<double>(g.q_len) *
                      static_cast<double>(g.k_len) * static_cast<double>(g.head_dim + g.value_dim);
  return work >= 262144.0;
}

// ---- backward ----

template <typename T, typename C>
MIXPREC_CPU_ALWAYS_INLINE void backward_unit(const T* dout, const T* q, const T* k, const T* v,
                                             const T* out, const C* lse, const MaskView& mask,
                                             const AttentionGeometry& g, std::int64_t bh, T* dq,
                                             T* dk, T* dv, C* buf) {
  const std::int64_t H = g.heads, D = g.head_dim, Dv = g.value_dim;
  const std::int64_t Tq = g.q_len, Tk = g.k_len;
  const std::int64_t Dp = round_up(D, kPad<C>), Dvp = round_up(Dv, kPad<C>);
  const std::int64_t b = bh / H, h = bh % H;
  const C scale = static_cast<C>(g.scale);

  C* qs = buf;                      // (Tq, Dp): scale * q of the whole head
  C* dos = qs + Tq * Dp;            // (Tq, Dvp): dout
  C* dqs = dos + Tq * Dvp;          // (Tq, Dp): dQ / scale, accumulated over key blocks
  C* dr = dqs + Tq * Dp;            // (Tq): rowsum(dout * out)
  C* ks = dr + Tq;                  // (kBlockK, Dp): k
  C* kt = ks + kBlockK * Dp;        // (Dp, kBlockK): k^T
  C* vt = kt + Dp * kBlockK;        // (Dvp, kBlockK): v^T
  C* p = vt + Dvp * kBlockK;        // (kBlockQ, kBlockK): probabilities
  C* dp = p + kBlockQ * kBlockK;    // (kBlockQ, kBlockK): dP, then dS
  C* dks = dp + kBlockQ * kBlockK;  // (kBlockK, Dp)
  C* dvs = dks + kBlockK * Dp;      // (kBlockK, Dvp)

  load_rows(q + (b * Tq * H + h) * D, H * D, Tq, D, scale, qs, Dp);
  load_rows(dout + (b * Tq * H + h) * Dv, H * Dv, Tq, Dv, C(1), dos, Dvp);
  std::fill(dqs, dqs + Tq * Dp, C(0));
  for (std::int64_t i = 0; i < Tq; ++i) {
    const T* orow = out + ((b * Tq + i) * H + h) * Dv;
    const C* drow = dos + i * Dvp;
    C sum = 0;
    for (std::int64_t c = 0; c < Dv; ++c) sum += drow[c] * core::load_as<C>(orow[c]);
    dr[i] = sum;
  }
  const C* lrow = lse + bh * Tq;

  for (std::int64_t j0 = 0; j0 < Tk; j0 += kBlockK) {
    const std::int64_t nk = std::min(kBlockK, Tk - j0);
    const T* kblock = k + ((b * Tk + j0) * H + h) * D;
    load_rows(kblock, H * D, nk, D, C(1), ks, Dp);
    for (std::int64_t r = nk; r < kBlockK; ++r) std::fill(ks + r * Dp, ks + (r + 1) * Dp, C(0));
    load_rows_transposed(kblock, H * D, nk, D, Dp, kt);
    load_rows_transposed(v + ((b * Tk + j0) * H + h) * Dv, H * Dv, nk, Dv, Dvp, vt);
    std::fill(dks, dks + kBlockK * Dp, C(0));
    std::fill(dvs, dvs + kBlockK * Dvp, C(0));
    // The first query that sees key j0 (causal): i >= j0 - (Tk - Tq); earlier blocks see nothing.
    const std::int64_t ifirst = g.causal ? std::clamp<std::int64_t>(j0 - (Tk - Tq), 0, Tq) : 0;
    for (std::int64_t i0 = ifirst / kBlockQ * kBlockQ; i0 < Tq; i0 += kBlockQ) {
      const std::int64_t nq = std::min(kBlockQ, Tq - i0);
      const C* qb = qs + i0 * Dp;
      const C* dob = dos + i0 * Dvp;
      std::fill(p, p + nq * kBlockK, C(0));
      gemm_acc<C>(nq, kBlockK, Dp, qb, Dp, 1, kt, kBlockK, p, kBlockK);
      mask_scores(g, mask, b, h, i0, nq, j0, nk, p);
      for (std::int64_t r = 0; r < nq; ++r) {
        C* row = p + r * kBlockK;
        const C lr = lrow[i0 + r];
#pragma omp simd
        for (std::int64_t j = 0; j < kBlockK; ++j) {
          row[j] = row[j] == -std::numeric_limits<C>::infinity() ? C(0) : exp_c(row[j] - lr);
        }
      }
      std::fill(dp, dp + nq * kBlockK, C(0));
      gemm_acc<C>(nq, kBlockK, Dvp, dob, Dvp, 1, vt, kBlockK, dp, kBlockK);
      // dP = (dO V^T) Z; dS = P (dP - Dr) in place of dP; then P Z for dV.
      if (g.dropout) apply_dropout(g, b, h, i0, nq, j0, nk, dp);
      for (std::int64_t r = 0; r < nq; ++r) {
        const C* prow = p + r * kBlockK;
        C* drow = dp + r * kBlockK;
        const C d = dr[i0 + r];
#pragma omp simd
        for (std::int64_t j = 0; j < kBlockK; ++j) drow[j] = prow[j] * (drow[j] - d);
      }
      if (g.dropout) apply_dropout(g, b, h, i0, nq, j0, nk, p);
      // dV (nk, Dvp) += (P Z)^T (nk, nq) x dO (nq, Dvp); dK += dS^T x (scale Q); dQ += dS x K.
      gemm_acc<C>(nk, Dvp, nq, p, 1, kBlockK, dob, Dvp, dvs, Dvp);
      gemm_acc<C>(nk, Dp, nq, dp, 1, kBlockK, qb, Dp, dks, Dp);
      gemm_acc<C>(nq, Dp, nk, dp, kBlockK, 1, ks, Dp, dqs + i0 * Dp, Dp);
    }
    for (std::int64_t r = 0; r < nk; ++r) {
      T* dkrow = dk + ((b * Tk + j0 + r) * H + h) * D;
      T* dvrow = dv + ((b * Tk + j0 + r) * H + h) * Dv;
      for (std::int64_t c = 0; c < D; ++c) dkrow[c] = core::store_as<T>(dks[r * Dp + c]);
      for (std::int64_t c = 0; c < Dv; ++c) dvrow[c] = core::store_as<T>(dvs[r * Dvp + c]);
    }
  }
  for (std::int64_t i = 0; i < Tq; ++i) {
    T* dqrow = dq + ((b * Tq + i) * H + h) * D;
    for (std::int64_t c = 0; c < D; ++c) dqrow[c] = core::store_as<T>(dqs[i * Dp + c] * scale);
  }
}

template <typename T, typename C>
MIXPREC_CPU_CLONES void backward_range(const T* dout, const T* q, const T* k, const T* v,
                                       const T* out, const C* lse, const MaskView& mask,
                                       const AttentionGeometry& g, std::int64_t first,
                                       std::int64_t last, T* dq, T* dk, T* dv, C* buf) {
  for (std::int64_t u = first; u < last; ++u) {
    backward_unit<T, C>(dout, q, k, v, out, lse, mask, g, u, dq, dk, dv, buf);
  }
}

std::size_t backward_scratch(const AttentionGeometry& g, std::int64_t pad) {
  const std::int64_t Dp = round_up(g.head_dim, pad), Dvp = round_up(g.value_dim, pad);
  return static_cast<std::size_t>(g.q_len * (2 * Dp + Dvp + 1) + kBlockK * Dp + Dp * kBlockK +
                                  Dvp * kBlockK + 2 * kBlockQ * kBlockK + kBlockK * (Dp + Dvp));
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& mask, const AttentionGeometry& g) {
  AttentionForward r;
  r.out = core::make_tensor(Shape({g.batch, g.q_len, g.heads, g.value_dim}), q.dtype(), q.device());
  const DType lse_dtype = q.dtype() == DType::float64 ? DType::float64 : DType::float32;
  r.lse = core::make_tensor(Shape({g.batch, g.heads, g.q_len}), lse_dtype, q.device());
  const MaskView mv = mask_view(mask);
  core::dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    using C = core::compute_t<T>;
    const T* qp = static_cast<const T*>(q.data_ptr());
    const T* kp = static_cast<const T*>(k.data_ptr());
    const T* vp = static_cast<const T*>(v.data_ptr());
    T* op = static_cast<T*>(r.out.data_ptr());
    C* lp = static_cast<C*>(r.lse.data_ptr());
    const std::int64_t units = g.batch * g.heads * ((g.q_len + kBlockQ - 1) / kBlockQ);
    run_units<C>(units, forward_scratch(g, kPad<C>), worth_parallel(g),
                 [&](std::int64_t first, std::int64_t last, C* buf) {
                   forward_range<T, C>(qp, kp, vp, mv, g, first, last, op, lp, buf);
                 });
  });
  return r;
}

AttentionGradients attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& out, const Tensor& lse,
                                      const Tensor& mask, const AttentionGeometry& g) {
  AttentionGradients r;
  r.dq = core::make_tensor(q.shape(), q.dtype(), q.device());
  r.dk = core::make_tensor(k.shape(), k.dtype(), k.device());
  r.dv = core::make_tensor(v.shape(), v.dtype(), v.device());
  const MaskView mv = mask_view(mask);
  core::dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    using C = core::compute_t<T>;
    const T* dop = static_cast<const T*>(dout.data_ptr());
    const T* qp = static_cast<const T*>(q.data_ptr());
    const T* kp = static_cast<const T*>(k.data_ptr());
    const T* vp = static_cast<const T*>(v.data_ptr());
    const T* op = static_cast<const T*>(out.data_ptr());
    const C* lp = static_cast<const C*>(lse.data_ptr());
    T* dqp = static_cast<T*>(r.dq.data_ptr());
    T* dkp = static_cast<T*>(r.dk.data_ptr());
    T* dvp = static_cast<T*>(r.dv.data_ptr());
    run_units<C>(g.batch * g.heads, backward_scratch(g, kPad<C>), worth_parallel(g),
                 [&](std::int64_t first, std::int64_t last, C* buf) {
                   backward_range<T, C>(dop, qp, kp, vp, op, lp, mv, g, first, last, dqp, dkp, dvp,
                                        buf);
                 });
  });
  return r;
}

}  // namespace mixprec::cpu
