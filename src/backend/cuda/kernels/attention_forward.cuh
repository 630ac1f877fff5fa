// The fused attention forward kernels: tensor cores for 16-bit dtypes with head dims that are
// multiples of 16 up to 128, scalar for the rest. Included through attention_kernels.cuh.
#pragma once

#include "backend/cuda/kernels/attention_common.cuh"

namespace mixprec::cuda::kernels::attention_kernels {

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

}  // namespace mixprec::cuda::kernels::attention_kernels
