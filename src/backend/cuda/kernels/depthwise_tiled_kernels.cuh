// Register-tiled depthwise forward and input-gradient kernels (launched by depthwise.cu where they
// apply; see depthwise.h), for the layers that dominate EfficientNet: a square K x K window,
// dilation 1, depth multiplier 1, channel pairs (two adjacent channels per thread, one vector load
// of each pixel's pair). The plain kernels (depthwise_kernels.cuh) load every tap's input and
// filter values for every output, which makes them bound by load instructions, not by memory. Here
// a thread computes a tile of consecutive outputs of one row: the K filter pairs of a window row
// stay in registers for the whole tile, and each input value of a window row is loaded once per
// tile, not once per tap. Every output adds the same products in the same order (kh, then kw; taps
// in the padding skipped) as the plain kernels, so the results are the same bits, with or without
// the 16-bit accumulation mode's per-step rounding.
//
// Like depthwise_kernels.cuh it uses only the names that header lists, so the host emulation
// (tests/unit/cuda_depthwise_emulation_test.cpp) runs these kernels too. Include after it.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"

namespace mixprec::cuda::kernels::depthwise_kernels {

// Outputs per thread along the row: 8 at stride 1, 4 at stride 2 (whose tile reads twice as many
// input columns per output; 4 keeps a 5x5 float32 tile within 128 registers).
template <int S>
inline constexpr int kTileOf = S == 1 ? 8 : 4;

// The channel pairs of columns first, ..., first + N - 1 of one row (row: the row's column 0 at
// this thread's channel pair), width columns wide: values[s] and inside[s] (zero outside).
template <typename T, int N>
__device__ __forceinline__ void load_row_span(const T* row, std::int32_t first, std::int32_t width,
                                              std::int32_t channels, compute_t<T> (&values)[N][2],
                                              bool (&inside)[N]) {
  MIXPREC_UNROLL_ALL
  for (int s = 0; s < N; ++s) {
    const std::int32_t col = first + s;
    inside[s] = col >= 0 && col < width;
    const Lanes<T, 2> v = inside[s] ? load_lanes<T, 2>(row + col * channels) : Lanes<T, 2>{};
    values[s][0] = inside[s] ? to_compute(v.v[0]) : compute_t<T>(0);
    values[s][1] = inside[s] ? to_compute(v.v[1]) : compute_t<T>(0);
  }
}

// The K filter pairs of window row kh at channel pair c.
template <typename T, int K>
__device__ __forceinline__ void load_filter_row(const T* w, int kh, std::int32_t channels,
                                                std::int32_t c, compute_t<T> (&wk)[K][2]) {
  MIXPREC_UNROLL_ALL
  for (int kw = 0; kw < K; ++kw) {
    const Lanes<T, 2> v = load_lanes<T, 2>(w + (kh * K + kw) * channels + c);
    wk[kw][0] = to_compute(v.v[0]), wk[kw][1] = to_compute(v.v[1]);
  }
}

// The geometry in the tiled kernels' 32-bit indices (the launcher checks that they fit).
struct TiledGeometry {
  std::int32_t channels, pairs, in_h, in_w, out_h, out_w;
};
__device__ __forceinline__ TiledGeometry tiled_geometry(const DepthwiseGeometry& g) {
  const std::int32_t channels = static_cast<std::int32_t>(g.channels);
  return {channels,
          channels / 2,
          static_cast<std::int32_t>(g.in_h),
          static_cast<std::int32_t>(g.in_w),
          static_cast<std::int32_t>(g.out_h),
          static_cast<std::int32_t>(g.out_w)};
}

// Grid-stride item q = ((n * rows + row) * tiles + tile) * pairs + j of a tiled kernel: image n,
// its row, the tile's first column (tile * kTile) and the pair's first channel 2j.
struct TileSlot {
  std::int32_t n, row, col0, c;
};
__device__ __forceinline__ TileSlot tile_slot(std::int32_t q, std::int32_t pairs,
                                              std::int32_t tiles, std::int32_t rows, int tile) {
  TileSlot s;
  s.c = (q % pairs) * 2;
  std::int32_t t = q / pairs;
  s.col0 = (t % tiles) * tile;
  t /= tiles;
  s.row = t % rows, s.n = t / rows;
  return s;
}

// Thread q = ((n * OH + oh) * tiles + tile) * pairs + j computes channels 2j, 2j + 1 of outputs
// (n, oh, tile * kTile + t), t < kTile, of a stride-S window. 32-bit indices (the launcher checks).
template <typename T, int K, int S>
__global__ void forward_tiled_kernel(DepthwiseGeometry g, const T* __restrict__ x,
                                     const T* __restrict__ w, const T* __restrict__ bias,
                                     T* __restrict__ y, bool round_each) {
  using C = compute_t<T>;
  constexpr int kTile = kTileOf<S>;
  constexpr int kSpan = (kTile - 1) * S + K;  // input columns one tile reads
  const auto [channels, pairs, in_h, in_w, out_h, out_w] = tiled_geometry(g);
  const std::int32_t tiles = (out_w + kTile - 1) / kTile;
  const std::int32_t total = static_cast<std::int32_t>(g.batch) * out_h * tiles * pairs;
  for (std::int32_t q = static_cast<std::int32_t>(global_thread()); q < total;
       q += static_cast<std::int32_t>(grid_threads())) {
    const auto [n, oh, ow0, c] = tile_slot(q, pairs, tiles, out_h, kTile);
    const std::int32_t iw0 = ow0 * S - static_cast<std::int32_t>(g.pad_left);
    C acc[kTile][2];
    MIXPREC_UNROLL_ALL
    for (int o = 0; o < kTile; ++o) acc[o][0] = acc[o][1] = C(0);
    MIXPREC_UNROLL_ALL
    for (int kh = 0; kh < K; ++kh) {
      const std::int32_t ih = oh * S - static_cast<std::int32_t>(g.pad_top) + kh;
      if (ih < 0 || ih >= in_h) continue;  // zero padding: the tap is skipped
      const T* row = x + ((n * in_h + ih) * in_w) * channels + c;
      C xs[kSpan][2];
      bool inside[kSpan];
      load_row_span<T, kSpan>(row, iw0, in_w, channels, xs, inside);
      C wk[K][2];
      load_filter_row<T, K>(w, kh, channels, c, wk);
      MIXPREC_UNROLL_ALL
      for (int o = 0; o < kTile; ++o) {
        MIXPREC_UNROLL_ALL
        for (int kw = 0; kw < K; ++kw) {
          if (!inside[o * S + kw]) continue;
          acc[o][0] = settle<T>(acc[o][0] + xs[o * S + kw][0] * wk[kw][0], round_each);
          acc[o][1] = settle<T>(acc[o][1] + xs[o * S + kw][1] * wk[kw][1], round_each);
        }
      }
    }
    C b0 = C(0), b1 = C(0);
    if (bias != nullptr) {
      const Lanes<T, 2> bv = load_lanes<T, 2>(bias + c);
      b0 = to_compute(bv.v[0]), b1 = to_compute(bv.v[1]);
    }
    T* out = y + ((n * out_h + oh) * out_w + ow0) * channels + c;
    MIXPREC_UNROLL_ALL
    for (int o = 0; o < kTile; ++o) {
      if (ow0 + o >= out_w) break;
      // The bias after the taps, as the plain kernel (and only with a bias: s + 0 is s anyway).
      const C s0 = bias != nullptr ? acc[o][0] + b0 : acc[o][0];
      const C s1 = bias != nullptr ? acc[o][1] + b1 : acc[o][1];
      store_lanes<T, 2>(out + o * channels,
                        Lanes<T, 2>{{from_compute<T>(s0), from_compute<T>(s1)}});
    }
  }
}

// The input gradient of a stride-1 window: dx[n, ih, iw, c] = the sum over (kh, kw) of
// dy[n, ih + pad_top - kh, iw + pad_left - kw, c] w[kh, kw, c] over the taps inside dy, in the
// plain kernel's order (kh, then kw). Thread q = ((n * H + ih) * tiles + tile) * pairs + j computes
// channels 2j, 2j + 1 of dx (n, ih, tile * kTile + t), t < kTile.
template <typename T, int K>
__global__ void backward_data_tiled_kernel(DepthwiseGeometry g, const T* __restrict__ dy,
                                           const T* __restrict__ w, T* __restrict__ dx,
                                           bool round_each) {
  using C = compute_t<T>;
  constexpr int kTile = kTileOf<1>;
  constexpr int kSpan = kTile + K - 1;  // dy columns one tile reads
  const auto [channels, pairs, in_h, in_w, out_h, out_w] = tiled_geometry(g);
  const std::int32_t tiles = (in_w + kTile - 1) / kTile;
  const std::int32_t total = static_cast<std::int32_t>(g.batch) * in_h * tiles * pairs;
  for (std::int32_t q = static_cast<std::int32_t>(global_thread()); q < total;
       q += static_cast<std::int32_t>(grid_threads())) {
    const auto [n, ih, iw0, c] = tile_slot(q, pairs, tiles, in_h, kTile);
    // dy column of span slot s: ow = iw0 + pad_left - (K - 1) + s; output o, tap kw reads slot
    // o + (K - 1) - kw.
    const std::int32_t ow_first = iw0 + static_cast<std::int32_t>(g.pad_left) - (K - 1);
    C acc[kTile][2];
    MIXPREC_UNROLL_ALL
    for (int o = 0; o < kTile; ++o) acc[o][0] = acc[o][1] = C(0);
    MIXPREC_UNROLL_ALL
    for (int kh = 0; kh < K; ++kh) {
      const std::int32_t oh = ih + static_cast<std::int32_t>(g.pad_top) - kh;
      if (oh < 0 || oh >= out_h) continue;
      const T* row = dy + ((n * out_h + oh) * out_w) * channels + c;
      C gs[kSpan][2];
      bool inside[kSpan];
      load_row_span<T, kSpan>(row, ow_first, out_w, channels, gs, inside);
      C wk[K][2];
      load_filter_row<T, K>(w, kh, channels, c, wk);
      MIXPREC_UNROLL_ALL
      for (int o = 0; o < kTile; ++o) {
        MIXPREC_UNROLL_ALL
        for (int kw = 0; kw < K; ++kw) {
          const int s = o + (K - 1) - kw;
          if (!inside[s]) continue;
          acc[o][0] = settle<T>(acc[o][0] + gs[s][0] * wk[kw][0], round_each);
          acc[o][1] = settle<T>(acc[o][1] + gs[s][1] * wk[kw][1], round_each);
        }
      }
    }
    T* out = dx + ((n * in_h + ih) * in_w + iw0) * channels + c;
    MIXPREC_UNROLL_ALL
    for (int o = 0; o < kTile; ++o) {
      if (iw0 + o >= in_w) break;
      store_lanes<T, 2>(out + o * channels,
                        Lanes<T, 2>{{from_compute<T>(acc[o][0]), from_compute<T>(acc[o][1])}});
    }
  }
}

}  // namespace mixprec::cuda::kernels::depthwise_kernels
