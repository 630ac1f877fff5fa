// The depthwise convolution's kernels (launched by depthwise.cu; see depthwise.h), in a header of
// their own so that a host emulation can run them on the CPU
// (tests/unit/cuda_depthwise_emulation_test.cpp): besides DepthwiseGeometry they use only these
// names of namespace mixprec::cuda::kernels, which common.cuh defines for the device and
// tests/support/cuda_host_emulation.h for the host: compute_t, to_compute, from_compute,
// global_thread, grid_threads, kWarp, warp_lane, warp_ordered_sum, MIXPREC_UNROLL(n) and
// MIXPREC_UNROLL_ALL (Lanes comes from lanes.cuh). Include after one of those two headers and
// depthwise.h.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"

namespace mixprec::cuda::kernels::depthwise_kernels {

// With `storage`, s = T(s + a * b) at every step (a product of two 16-bit values is exact in float,
// so fused or not, each step rounds as the CPU reference does).
template <typename T>
__device__ __forceinline__ compute_t<T> settle(compute_t<T> s, bool round_each) {
  return round_each ? to_compute(from_compute<T>(s)) : s;
}

// The window's extent and stride: compile-time K and S (square K x K, stride S in both axes) when
// positive, else the geometry's (runtime).
template <typename I, int K, int S>
struct Window {
  I kernel_h, kernel_w, stride_h, stride_w;
  __device__ __forceinline__ explicit Window(const DepthwiseGeometry& g)
      : kernel_h(K > 0 ? I(K) : static_cast<I>(g.kernel_h)),
        kernel_w(K > 0 ? I(K) : static_cast<I>(g.kernel_w)),
        stride_h(S > 0 ? I(S) : static_cast<I>(g.stride_h)),
        stride_w(S > 0 ? I(S) : static_cast<I>(g.stride_w)) {}
};

// One thread computes V adjacent output channels (V = 2 for 16-bit storage: one 4-byte load of the
// filter pair and of the input pair (M == 1) or one input value shared by both (even M), one 4-byte
// store). Index arithmetic in I: 32-bit when every offset fits (far cheaper division than 64-bit).
// K, S > 0: a square K x K window of stride S (the tap loops unroll).
template <typename T, typename I, int V, int K, int S>
__global__ void forward_kernel(DepthwiseGeometry geometry, const T* __restrict__ x,
                               const T* __restrict__ w, const T* __restrict__ bias,
                               T* __restrict__ y, bool round_each) {
  using C = compute_t<T>;
  constexpr int kUnroll = K > 0 ? K : 1;  // a runtime window: the loops as written
  const Window<I, K, S> win(geometry);
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I dil_h = static_cast<I>(geometry.dilation_h), dil_w = static_cast<I>(geometry.dilation_w);
  const I pad_top = static_cast<I>(geometry.pad_top), pad_left = static_cast<I>(geometry.pad_left);
  const I out_h = static_cast<I>(geometry.out_h), out_w = static_cast<I>(geometry.out_w);
  const I cm = channels * m;
  const I groups = static_cast<I>(geometry.batch) * out_h * out_w * (cm / V);
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V;  // the first of the V output elements
    const I oc = i % cm;
    I t = i / cm;
    const I ow = t % out_w;
    t /= out_w;
    const I oh = t % out_h, n = t / out_h;
    C s[V];
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) s[v] = C(0);
    MIXPREC_UNROLL(kUnroll)
    for (I kh = 0; kh < win.kernel_h; ++kh) {
      const I ih = oh * win.stride_h - pad_top + kh * dil_h;
      if (ih < 0 || ih >= in_h) continue;  // zero padding
      MIXPREC_UNROLL(kUnroll)
      for (I kw = 0; kw < win.kernel_w; ++kw) {
        const I iw = ow * win.stride_w - pad_left + kw * dil_w;
        if (iw < 0 || iw >= in_w) continue;
        const T* xp = x + ((n * in_h + ih) * in_w + iw) * channels;
        const T* wp = w + (kh * win.kernel_w + kw) * cm + oc;
        if constexpr (V == 2) {
          const Lanes<T, 2> wv = load_lanes<T, 2>(wp);
          C a0, a1;
          if (m == 1) {  // channels oc, oc + 1 read inputs oc, oc + 1
            const Lanes<T, 2> xv = load_lanes<T, 2>(xp + oc);
            a0 = to_compute(xv.v[0]), a1 = to_compute(xv.v[1]);
          } else {  // even M: both read input oc / M
            a0 = a1 = to_compute(xp[oc / m]);
          }
          s[0] = settle<T>(s[0] + a0 * to_compute(wv.v[0]), round_each);
          s[1] = settle<T>(s[1] + a1 * to_compute(wv.v[1]), round_each);
        } else {
          s[0] = settle<T>(s[0] + to_compute(xp[oc / m]) * to_compute(wp[0]), round_each);
        }
      }
    }
    if constexpr (V == 2) {
      if (bias != nullptr) {
        const Lanes<T, 2> bv = load_lanes<T, 2>(bias + oc);
        s[0] += to_compute(bv.v[0]), s[1] += to_compute(bv.v[1]);
      }
      *reinterpret_cast<Lanes<T, 2>*>(y + i) =
          Lanes<T, 2>{{from_compute<T>(s[0]), from_compute<T>(s[1])}};
    } else {
      if (bias != nullptr) s[0] += to_compute(bias[oc]);
      y[i] = from_compute<T>(s[0]);
    }
  }
}

// dx[n, ih, iw, c] = sum over (kh, kw, m) of dy[n, oh, ow, c * M + m] w[kh, kw, c * M + m] for the
// (oh, ow) whose tap (kh, kw) reads (ih, iw); the CPU reference's order (kh, kw, m). V = 2 (16-bit,
// M == 1): channels c, c + 1 with 4-byte loads of dy and w and a 4-byte store. K, S as forward.
template <typename T, typename I, int V, int K, int S>
__global__ void backward_data_kernel(DepthwiseGeometry geometry, const T* __restrict__ dy,
                                     const T* __restrict__ w, T* __restrict__ dx, bool round_each) {
  using C = compute_t<T>;
  constexpr int kUnroll = K > 0 ? K : 1;  // a runtime window: the loops as written
  const Window<I, K, S> win(geometry);
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I dil_h = static_cast<I>(geometry.dilation_h), dil_w = static_cast<I>(geometry.dilation_w);
  const I pad_top = static_cast<I>(geometry.pad_top), pad_left = static_cast<I>(geometry.pad_left);
  const I out_h = static_cast<I>(geometry.out_h), out_w = static_cast<I>(geometry.out_w);
  const I cm = channels * m;
  const I groups = static_cast<I>(geometry.batch) * in_h * in_w * (channels / V);
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V;
    const I c = i % channels;
    I t = i / channels;
    const I iw = t % in_w;
    t /= in_w;
    const I ih = t % in_h, n = t / in_h;
    C s[V];
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) s[v] = C(0);
    MIXPREC_UNROLL(kUnroll)
    for (I kh = 0; kh < win.kernel_h; ++kh) {
      const I th = ih + pad_top - kh * dil_h;
      if (th < 0 || th % win.stride_h != 0 || th / win.stride_h >= out_h) continue;
      const I oh = th / win.stride_h;
      MIXPREC_UNROLL(kUnroll)
      for (I kw = 0; kw < win.kernel_w; ++kw) {
        const I tw = iw + pad_left - kw * dil_w;
        if (tw < 0 || tw % win.stride_w != 0 || tw / win.stride_w >= out_w) continue;
        const I ow = tw / win.stride_w;
        const T* dyp = dy + ((n * out_h + oh) * out_w + ow) * cm + c * m;
        const T* wp = w + (kh * win.kernel_w + kw) * cm + c * m;
        if constexpr (V == 2) {
          const Lanes<T, 2> gv = load_lanes<T, 2>(dyp);
          const Lanes<T, 2> wv = load_lanes<T, 2>(wp);
          s[0] = settle<T>(s[0] + to_compute(gv.v[0]) * to_compute(wv.v[0]), round_each);
          s[1] = settle<T>(s[1] + to_compute(gv.v[1]) * to_compute(wv.v[1]), round_each);
        } else {
          for (I j = 0; j < m; ++j) {
            s[0] = settle<T>(s[0] + to_compute(dyp[j]) * to_compute(wp[j]), round_each);
          }
        }
      }
    }
    if constexpr (V == 2) {
      *reinterpret_cast<Lanes<T, 2>*>(dx + i) =
          Lanes<T, 2>{{from_compute<T>(s[0]), from_compute<T>(s[1])}};
    } else {
      dx[i] = from_compute<T>(s[0]);
    }
  }
}

// Pass 1 of the filter gradient, any window: thread (p, e), e = (kh, kw, oc) innermost, sums
// x[n, ih, iw, oc / M] dy[n, oh, ow, oc] over the rows (n, oh) of chunk p (all ow) into
// partials[p * E + e], in the CPU reference's order (n, oh, ow).
template <typename T>
__global__ void filter_partials_kernel(DepthwiseGeometry g, const T* __restrict__ x,
                                       const T* __restrict__ dy,
                                       compute_t<T>* __restrict__ partials, std::int64_t chunks,
                                       bool round_each) {
  using C = compute_t<T>;
  const std::int64_t cm = g.channels * g.multiplier;
  const std::int64_t e_count = g.kernel_h * g.kernel_w * cm;
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t per_chunk = (rows + chunks - 1) / chunks;
  const std::int64_t total = chunks * e_count;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t e = i % e_count, p = i / e_count;
    const std::int64_t oc = e % cm, kw = (e / cm) % g.kernel_w, kh = e / (cm * g.kernel_w);
    const std::int64_t c = oc / g.multiplier;
    const std::int64_t r_end = (p + 1) * per_chunk < rows ? (p + 1) * per_chunk : rows;
    C s = C(0);
    for (std::int64_t r = p * per_chunk; r < r_end; ++r) {
      const std::int64_t n = r / g.out_h, oh = r % g.out_h;
      const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) continue;
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_w) continue;
        const C a = to_compute(x[((n * g.in_h + ih) * g.in_w + iw) * g.channels + c]);
        const C b = to_compute(dy[((n * g.out_h + oh) * g.out_w + ow) * cm + oc]);
        s = settle<T>(s + a * b, round_each);
      }
    }
    partials[i] = s;
  }
}

// Pass 1 of the filter gradient for a square K x K window with multiplier 1 (float sums): thread
// (p, j), the group j of V adjacent channels innermost, sums the products of all K * K taps at
// once over the output pixels [p * per_chunk, (p + 1) * per_chunk) of the (n, oh, ow) order, each
// tap in (n, oh, ow) order. dy is read once per pixel (consecutive threads: consecutive channels,
// coalesced). The same partials layout as filter_partials_kernel:
// partials[p * E + (kh * K + kw) * C + c].
// S > 0 (dilation 1 and stride S along the rows, the launcher checks): the K x K input window stays
// in registers
// and slides along the row, so a pixel loads only the S new columns of each window row (S K
// loads, not K K); it is reloaded whole at a chunk's first pixel and at each new row. S == 0: any
// stride and dilation, the whole window loaded for every pixel. The sums are the same either way.
template <typename T, int K, int V, int S = 0>
__global__ void filter_taps_kernel(DepthwiseGeometry g, const T* __restrict__ x,
                                   const T* __restrict__ dy, compute_t<T>* __restrict__ partials,
                                   std::int64_t chunks, std::int64_t per_chunk) {
  using C = compute_t<T>;
  const std::int64_t channels = g.channels;
  const std::int64_t lanes = channels / V;  // channel groups
  const std::int64_t pixels = g.batch * g.out_h * g.out_w;
  const std::int64_t e_count = K * K * channels;
  const std::int64_t image = g.in_h * g.in_w * channels;
  const std::int64_t total = chunks * lanes;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t c = (i % lanes) * V, p = i / lanes;
    C s[K * K][V];
    MIXPREC_UNROLL_ALL
    for (int tap = 0; tap < K * K; ++tap) {
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) s[tap][v] = C(0);
    }
    C win[K][K][V];       // the input values of tap (kh, kw) of the current pixel
    bool col_in[K] = {};  // whether column kw of the window lies inside the input
    MIXPREC_UNROLL_ALL
    for (int kh = 0; kh < K; ++kh) {
      MIXPREC_UNROLL_ALL
      for (int kw = 0; kw < K; ++kw) {
        MIXPREC_UNROLL_ALL
        for (int v = 0; v < V; ++v) win[kh][kw][v] = C(0);
      }
    }
    bool slid = false;  // whether win holds the previous pixel's window (same row)
    const std::int64_t begin = p * per_chunk;
    const std::int64_t end = begin + per_chunk < pixels ? begin + per_chunk : pixels;
    std::int64_t ow = begin % g.out_w, oh = (begin / g.out_w) % g.out_h;
    std::int64_t xn = (begin / (g.out_w * g.out_h)) * image + c;  // image n of pixel `begin`
    for (std::int64_t q = begin; q < end; ++q) {
      const Lanes<T, V> gv = load_lanes<T, V>(dy + q * channels + c);
      const std::int64_t ih0 = oh * g.stride_h - g.pad_top, iw0 = ow * g.stride_w - g.pad_left;
      // The window's columns: all of them, or (sliding) the last S after moving the rest left.
      int first = 0;
      if constexpr (S > 0) {
        if (slid) {
          first = K - S;
          MIXPREC_UNROLL_ALL
          for (int kw = 0; kw < K - S; ++kw) {
            col_in[kw] = col_in[kw + S];
            MIXPREC_UNROLL_ALL
            for (int kh = 0; kh < K; ++kh) {
              MIXPREC_UNROLL_ALL
              for (int v = 0; v < V; ++v) win[kh][kw][v] = win[kh][kw + S][v];
            }
          }
        }
      }
      MIXPREC_UNROLL_ALL
      for (int kw = 0; kw < K; ++kw) {
        if (kw < first) continue;
        const std::int64_t iw = iw0 + kw * g.dilation_w;
        col_in[kw] = iw >= 0 && iw < g.in_w;
        MIXPREC_UNROLL_ALL
        for (int kh = 0; kh < K; ++kh) {
          const std::int64_t ih = ih0 + kh * g.dilation_h;
          if (!col_in[kw] || ih < 0 || ih >= g.in_h) continue;  // zero padding: never read
          const Lanes<T, V> xv = load_lanes<T, V>(x + xn + (ih * g.in_w + iw) * channels);
          MIXPREC_UNROLL_ALL
          for (int v = 0; v < V; ++v) win[kh][kw][v] = to_compute(xv.v[v]);
        }
      }
      MIXPREC_UNROLL_ALL
      for (int kh = 0; kh < K; ++kh) {
        const std::int64_t ih = ih0 + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;  // zero padding: the tap is skipped
        MIXPREC_UNROLL_ALL
        for (int kw = 0; kw < K; ++kw) {
          if (!col_in[kw]) continue;
          MIXPREC_UNROLL_ALL
          for (int v = 0; v < V; ++v) s[kh * K + kw][v] += win[kh][kw][v] * to_compute(gv.v[v]);
        }
      }
      slid = true;
      if (++ow == g.out_w) {  // the next pixel: (n, oh, ow) in row-major order
        ow = 0, slid = false;
        if (++oh == g.out_h) oh = 0, xn += image;
      }
    }
    C* out = partials + p * e_count + c;
    MIXPREC_UNROLL_ALL
    for (int tap = 0; tap < K * K; ++tap) {
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) out[tap * channels + v] = s[tap][v];
    }
  }
}

// Pass 2: dw[e] = the chunks' partial sums added in double in warp_ordered_sum's fixed order (one
// warp per filter element), rounded once.
template <typename T>
__global__ void filter_finish_kernel(const compute_t<T>* __restrict__ partials, std::int64_t chunks,
                                     std::int64_t e_count, T* __restrict__ dw) {
  // e is the same for the 32 lanes of a warp (the grid stride is whole warps): they loop together.
  const std::int64_t warps = grid_threads() / kWarp;
  for (std::int64_t e = global_thread() / kWarp; e < e_count; e += warps) {
    const double s = warp_ordered_sum(partials + e, chunks, e_count);
    if (warp_lane() == 0) dw[e] = from_compute<T>(static_cast<compute_t<T>>(s));
  }
}

}  // namespace mixprec::cuda::kernels::depthwise_kernels
