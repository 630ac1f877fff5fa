// The fused attention backward kernels: D_i, then dK/dV over key blocks and dQ over query
// blocks in a fixed order (no atomics); tensor cores for 16-bit dtypes with head dims that are
// multiples of 16 up to 128, scalar for the rest. Included through attention_kernels.cuh.
#pragma once

#include "backend/cuda/kernels/attention_common.cuh"

namespace mixprec::cuda::kernels::attention_kernels {

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

// ---- scalar backward kernels (any dtype and head dims) ----

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
