// The 2-D pooling kernels (launched by pooling.cu; see pooling.h), in a header of their own so that
// a host emulation can run them on the CPU (tests/unit/cuda_pooling_emulation_test.cpp): besides
// PoolShape they use only these names of namespace mixprec::cuda::kernels, which common.cuh defines
// for the device and tests/support/cuda_host_emulation.h for the host: compute_t, to_compute,
// from_compute, global_thread, grid_threads and MIXPREC_UNROLL_ALL (Lanes comes from lanes.cuh).
// Include after one of those two headers and pooling.h.
//
// The pooling passes are memory-bound: each thread handles V consecutive channels of one pixel
// (V * sizeof(T) = 16 bytes where the channel count and the pointers allow, else V = 1), so a
// warp reads and writes whole contiguous 16-byte vectors of the NHWC rows, and the window's index
// arithmetic is paid once per V channels instead of once per element.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"

namespace mixprec::cuda::kernels::pooling_kernels {

// The geometry in the index type I (32-bit when every offset fits: far cheaper division).
template <typename I>
struct Geometry {
  I batch, in_h, in_w, channels, window_h, window_w, stride_h, stride_w, pad_top, pad_left, out_h,
      out_w;
  __device__ __forceinline__ explicit Geometry(const PoolShape& g)
      : batch(static_cast<I>(g.batch)),
        in_h(static_cast<I>(g.in_h)),
        in_w(static_cast<I>(g.in_w)),
        channels(static_cast<I>(g.channels)),
        window_h(static_cast<I>(g.window_h)),
        window_w(static_cast<I>(g.window_w)),
        stride_h(static_cast<I>(g.stride_h)),
        stride_w(static_cast<I>(g.stride_w)),
        pad_top(static_cast<I>(g.pad_top)),
        pad_left(static_cast<I>(g.pad_left)),
        out_h(static_cast<I>(g.out_h)),
        out_w(static_cast<I>(g.out_w)) {}
};

// A half-open range [begin, end) of rows or columns (input or output).
template <typename I>
struct Span {
  I begin, end;
};

// The real (unpadded) rows of the window starting at `start` (negative: padding) along one axis:
// [max(start, 0), min(start + window, in)). Both padding rules leave every window a real row.
template <typename I>
__device__ __forceinline__ Span<I> real_span(I start, I window, I in) {
  return {start > 0 ? start : I(0), start + window < in ? start + window : in};
}

// The output windows o whose rows o * stride - pad + [0, window) hold input row i, computed
// directly (no per-tap divisibility test): o * stride <= i + pad and o * stride >= i + pad - window
// + 1, within [0, out).
template <typename I>
__device__ __forceinline__ Span<I> covering_windows(I i, I pad, I window, I stride, I out) {
  const I lowest = i + pad - window + 1;
  const I first = lowest > 0 ? (lowest + stride - 1) / stride : I(0);
  const I last = (i + pad) / stride;
  return {first, last < out ? last + 1 : out};
}

// V argmax entries at p (aligned to V entries): one vector access where it spans at most 16
// bytes, else V scalar ones (int32 entries with 8 lanes: the rare windows of over 256 taps).
template <typename A, int V>
__device__ __forceinline__ Lanes<A, V> load_taps(const A* p) {
  if constexpr (V * sizeof(A) <= 16) {
    return load_lanes<A, V>(p);
  } else {
    Lanes<A, V> taps;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) taps.v[v] = p[v];
    return taps;
  }
}
template <typename A, int V>
__device__ __forceinline__ void store_taps(A* p, const Lanes<A, V>& taps) {
  if constexpr (V * sizeof(A) <= 16) {
    store_lanes<A, V>(p, taps);
  } else {
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) p[v] = taps.v[v];
  }
}

// The first maximum of each lane over the window (row-major tap order: a later equal value does
// not replace it, a NaN never does, a NaN first stays), its value copied into `out` and its tap
// kh * window_w + kw into `taps`. x points at channel c of the window's image; the window starts
// at (top, left).
template <typename T, typename I, typename A, int V>
__device__ __forceinline__ void window_max(const T* x, const Geometry<I>& g, Span<I> rows,
                                           Span<I> cols, I top, I left, Lanes<T, V>& out,
                                           Lanes<A, V>& taps) {
  using C = compute_t<T>;
  // The first real tap seeds every lane; the loop compares it with itself again (never greater).
  out = load_lanes<T, V>(x + (rows.begin * g.in_w + cols.begin) * g.channels);
  const A first = static_cast<A>((rows.begin - top) * g.window_w + (cols.begin - left));
  C best[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) best[v] = to_compute(out.v[v]), taps.v[v] = first;
  for (I h = rows.begin; h < rows.end; ++h) {
    for (I w = cols.begin; w < cols.end; ++w) {
      const Lanes<T, V> xv = load_lanes<T, V>(x + (h * g.in_w + w) * g.channels);
      const A tap = static_cast<A>((h - top) * g.window_w + (w - left));
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) {
        const C value = to_compute(xv.v[v]);
        if (value > best[v]) best[v] = value, out.v[v] = xv.v[v], taps.v[v] = tap;
      }
    }
  }
}

// The mean of each lane over the window's real elements: summed in compute_t<T> in row-major
// order, divided by their count, rounded once.
template <typename T, typename I, int V>
__device__ __forceinline__ void window_mean(const T* x, const Geometry<I>& g, Span<I> rows,
                                            Span<I> cols, Lanes<T, V>& out) {
  using C = compute_t<T>;
  C sum[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) sum[v] = C(0);
  for (I h = rows.begin; h < rows.end; ++h) {
    for (I w = cols.begin; w < cols.end; ++w) {
      const Lanes<T, V> xv = load_lanes<T, V>(x + (h * g.in_w + w) * g.channels);
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) sum[v] += to_compute(xv.v[v]);
    }
  }
  const C count = static_cast<C>((rows.end - rows.begin) * (cols.end - cols.begin));
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) out.v[v] = from_compute<T>(sum[v] / count);
}

// y (batch, out_h, out_w, channels) from x (batch, in_h, in_w, channels); with `max` and a
// non-null argmax, each window's first maximum tap per channel (A: uint8 or int32, see pooling.h).
// Thread item q covers channels [c, c + V) of one output pixel. V divides channels; x, y, argmax
// aligned to V elements.
template <typename T, typename I, typename A, int V>
__global__ void forward_kernel(bool max, PoolShape shape, const T* __restrict__ x,
                               T* __restrict__ y, A* __restrict__ argmax) {
  const Geometry<I> g(shape);
  const I lanes = g.channels / V;
  const I items = g.batch * g.out_h * g.out_w * lanes;
  for (I q = static_cast<I>(global_thread()); q < items; q += static_cast<I>(grid_threads())) {
    const I c = (q % lanes) * V;
    I t = q / lanes;
    const I ow = t % g.out_w;
    t /= g.out_w;
    const I oh = t % g.out_h, n = t / g.out_h;
    const I top = oh * g.stride_h - g.pad_top, left = ow * g.stride_w - g.pad_left;
    const Span<I> rows = real_span(top, g.window_h, g.in_h);
    const Span<I> cols = real_span(left, g.window_w, g.in_w);
    const T* image = x + n * g.in_h * g.in_w * g.channels + c;
    Lanes<T, V> out;
    if (max) {
      Lanes<A, V> taps;
      window_max<T, I, A, V>(image, g, rows, cols, top, left, out, taps);
      if (argmax != nullptr) store_taps<A, V>(argmax + q * V, taps);
    } else {
      window_mean<T, I, V>(image, g, rows, cols, out);
    }
    store_lanes<T, V>(y + q * V, out);
  }
}

// Adds to sum, for each lane, the gradient of every window (oh, ow) in rows x cols (those holding
// input pixel (ih, iw)) whose recorded maximum is that pixel, windows in row-major order. dy and
// argmax point at channel c of the image's first output pixel.
template <typename T, typename I, typename A, int V>
__device__ __forceinline__ void route_max(const T* dy, const A* argmax, const Geometry<I>& g, I ih,
                                          I iw, Span<I> rows, Span<I> cols,
                                          compute_t<T> (&sum)[V]) {
  for (I oh = rows.begin; oh < rows.end; ++oh) {
    const I kh = ih + g.pad_top - oh * g.stride_h;
    for (I ow = cols.begin; ow < cols.end; ++ow) {
      const A tap = static_cast<A>(kh * g.window_w + (iw + g.pad_left - ow * g.stride_w));
      const I o = (oh * g.out_w + ow) * g.channels;
      const Lanes<A, V> taps = load_taps<A, V>(argmax + o);
      bool chosen = false;
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) chosen = chosen || taps.v[v] == tap;
      if (!chosen) continue;  // no lane's maximum is here: dy is not read
      const Lanes<T, V> d = load_lanes<T, V>(dy + o);
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) {
        if (taps.v[v] == tap) sum[v] += to_compute(d.v[v]);
      }
    }
  }
}

// Adds to sum, for each lane, dy / count of every window (oh, ow) in rows x cols (count: the
// window's real elements), windows in row-major order. dy points at channel c of the image's first
// output pixel.
template <typename T, typename I, int V>
__device__ __forceinline__ void spread_mean(const T* dy, const Geometry<I>& g, Span<I> rows,
                                            Span<I> cols, compute_t<T> (&sum)[V]) {
  using C = compute_t<T>;
  for (I oh = rows.begin; oh < rows.end; ++oh) {
    const Span<I> real_rows = real_span(oh * g.stride_h - g.pad_top, g.window_h, g.in_h);
    const I height = real_rows.end - real_rows.begin;
    for (I ow = cols.begin; ow < cols.end; ++ow) {
      const Span<I> real_cols = real_span(ow * g.stride_w - g.pad_left, g.window_w, g.in_w);
      const C count = static_cast<C>(height * (real_cols.end - real_cols.begin));
      const Lanes<T, V> d = load_lanes<T, V>(dy + (oh * g.out_w + ow) * g.channels);
      MIXPREC_UNROLL_ALL
      for (int v = 0; v < V; ++v) sum[v] += to_compute(d.v[v]) / count;
    }
  }
}

// dx (batch, in_h, in_w, channels) from dy (batch, out_h, out_w, channels): each input element
// gathers the gradients of the windows holding it (max: only those that chose it, per argmax from
// forward_kernel), summed in compute_t<T> in a fixed order, rounded once; no atomics. Thread item
// q covers channels [c, c + V) of one input pixel. V divides channels; pointers aligned to V
// elements.
template <typename T, typename I, typename A, int V>
__global__ void backward_kernel(bool max, PoolShape shape, const T* __restrict__ dy,
                                const A* __restrict__ argmax, T* __restrict__ dx) {
  using C = compute_t<T>;
  const Geometry<I> g(shape);
  const I lanes = g.channels / V;
  const I items = g.batch * g.in_h * g.in_w * lanes;
  for (I q = static_cast<I>(global_thread()); q < items; q += static_cast<I>(grid_threads())) {
    const I c = (q % lanes) * V;
    I t = q / lanes;
    const I iw = t % g.in_w;
    t /= g.in_w;
    const I ih = t % g.in_h, n = t / g.in_h;
    const Span<I> rows = covering_windows(ih, g.pad_top, g.window_h, g.stride_h, g.out_h);
    const Span<I> cols = covering_windows(iw, g.pad_left, g.window_w, g.stride_w, g.out_w);
    const I image = n * g.out_h * g.out_w * g.channels + c;
    C sum[V];
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) sum[v] = C(0);
    if (max) {
      route_max<T, I, A, V>(dy + image, argmax + image, g, ih, iw, rows, cols, sum);
    } else {
      spread_mean<T, I, V>(dy + image, g, rows, cols, sum);
    }
    Lanes<T, V> out;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) out.v[v] = from_compute<T>(sum[v]);
    store_lanes<T, V>(dx + q * V, out);
  }
}

}  // namespace mixprec::cuda::kernels::pooling_kernels
