// The depthwise forward and backward-data kernels; see depthwise_conv.h. Both passes are one loop:
// every output row (a row of y, or of dx) reads a few input rows (of x, or of dy) at filter rows
// kh, and every output column a few input columns at filter columns kw, so each output element is
// a sum over its valid (kh, kw) taps, computed by one thread in the order (kh, kw). Taps that would
// read padding are never visited (no 0 * inf).
//
// Channels run in register blocks of kLanes floats (one AVX-512 register; bfloat16 values widened
// in registers, and rounded once on store as simd_convert.h does; float16 runs as float32 on
// exactly widened copies, rounded once). In bfloat16 on an AVX-512 CPU, the common geometries
// (kernel width 3 or 5, stride 1 or 2, dilation 1: EfficientNet, MobileNet) run a tile of J output
// columns whose J sums stay in registers over all the taps, each filter vector loaded once per tile
// and filter row and each input vector once per filter row (the compiler merges the loads the J
// columns share). Which (column, tap) pairs a tile adds, and from which input column, is fixed at
// compile time: forward, output column j reads input column j * S + kw; backward data, dx column j
// reads dy column (P + j - kw) / S where that divides (P: the tile's phase modulo the stride).
// Columns whose taps reach past the input (edges), the channels after the last full block, and
// every other geometry (dilation, other sizes) run the generic loop over precomputed per-column tap
// lists.
//
// AVX512_BF16's vdpbf16ps (two taps of one channel per float32 lane, no widening) was tried for the
// bfloat16 tiles and not kept: on this project's Xeon it issues at half the rate of a 512-bit FMA
// (the same multiply-adds per cycle) and shares its ports with the word interleaves it needs; a
// prototype of the stride-1 forward tile ran 1.01-1.02x (3x3) and 1.11-1.21x (5x5, the odd tap
// paired with zero) the time of these tiles.
#include "backend/cpu/depthwise_conv.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cast.h"
#include "backend/cpu/depthwise_filters.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "core/convert_kernels.h"
#include "core/dispatch.h"
#include "core/env_switch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

constinit core::EnvSwitch g_depthwise("MIXPREC_DEPTHWISE");

// Channels per register block.
constexpr int kLanes = 16;
// Output columns per tile: the wide tile, then the narrow one for what is left of the interior.
constexpr int kWideTile = 8;
constexpr int kNarrowTile = 4;
// Parallel only above this many multiply-adds.
constexpr std::int64_t kParallelWork = std::int64_t{1} << 15;
// Output positions per image (out_h * out_w) of the small maps in the dispatch rule (see
// depthwise_forward_path).
constexpr std::int64_t kSmallOutput = 4;
// At most this many blocks of output rows for the threads (a fixed partition).
constexpr std::int64_t kMaxBlocks = 256;

// An input row that an output row reads at filter row kh (the row's first element).
template <typename T>
struct RowTap {
  const T* row;
  std::int64_t kh;
};

// An input column that an output column reads at filter column kw.
struct ColTap {
  std::int64_t kw, col;
};

// One pass as "output rows/columns read input rows/columns through taps".
struct Plan {
  bool backward = false;
  std::int64_t channels = 0, kernel_h = 0, kernel_w = 0;
  std::int64_t out_h = 0, out_w = 0;  // output rows / columns per image (y, or dx)
  std::int64_t in_h = 0, in_w = 0;    // input rows / columns per image (x, or dy)
  std::int64_t stride_h = 1, dilation_h = 1, pad_top = 0, pad_left = 0;
  // Per output column o, its taps col_taps[col_start[o], col_start[o + 1]) in increasing kw.
  std::vector<std::int64_t> col_start;
  std::vector<ColTap> col_taps;
  // The tile loops: kind = kernel_w * 10 + stride_w (31, 32, 51, 52; 0: generic loop only), the
  // interior output columns [lo, hi) (every tap inside the input) and, backward, the tiles' phase
  // P = (lo + pad_left) mod stride_w (see tile_offset; the tiles' widths are even).
  int kind = 0, phase = 0;
  std::int64_t lo = 0, hi = 0;
  const float* filters = nullptr;  // float32 (KH, KW, C)
  const float* bias = nullptr;     // float32 (C): the bias or zeros
};

// The input column that output column o reads at tap kw, or -1 where it reads padding (or, in
// backward data, where no output column reads o through kw).
std::int64_t column_of(const ConvGeometry& g, bool backward, std::int64_t o, std::int64_t kw) {
  if (!backward) {
    const std::int64_t iw = o * g.stride_w - g.pad_left + kw * g.dilation_w;
    return iw >= 0 && iw < g.in_w ? iw : -1;
  }
  const std::int64_t t = o + g.pad_left - kw * g.dilation_w;
  if (t < 0 || t % g.stride_w != 0 || t / g.stride_w >= g.out_w) return -1;
  return t / g.stride_w;
}

// The interior columns of the tile loops (dilation 1): forward, ow * S - pl >= 0 and ow * S - pl +
// KW - 1 < in_w; backward, iw + pl - (KW - 1) >= 0 (every tap's dy column >= 0) and (iw + pl) / S
// < out_w (the largest dy column inside).
void plan_tiles(const ConvGeometry& g, Plan& p) {
  const std::int64_t kw = g.kernel_w, s = g.stride_w, pl = g.pad_left;
  const bool sizes = (kw == 3 || kw == 5) && (s == 1 || s == 2) && g.dilation_w == 1;
  if (!sizes || p.channels < kLanes) return;
  std::int64_t lo = 0, hi = 0;
  if (!p.backward) {
    lo = (pl + s - 1) / s;
    hi = g.in_w - kw + pl < 0 ? 0 : (g.in_w - kw + pl) / s + 1;
  } else {
    lo = std::max<std::int64_t>(0, kw - 1 - pl);
    hi = s * g.out_w - pl;  // iw + pl <= S * out_w - 1
  }
  p.lo = std::min(lo, p.out_w);
  p.hi = std::clamp(hi, p.lo, p.out_w);
  p.kind = static_cast<int>(kw * 10 + s);
  p.phase = p.backward ? static_cast<int>((p.lo + pl) % s) : 0;
}

Plan make_plan(const ConvGeometry& g, bool backward) {
  Plan p;
  p.backward = backward;
  p.channels = g.in_channels, p.kernel_h = g.kernel_h, p.kernel_w = g.kernel_w;
  p.out_h = backward ? g.in_h : g.out_h, p.out_w = backward ? g.in_w : g.out_w;
  p.in_h = backward ? g.out_h : g.in_h, p.in_w = backward ? g.out_w : g.in_w;
  p.stride_h = g.stride_h, p.dilation_h = g.dilation_h;
  p.pad_top = g.pad_top, p.pad_left = g.pad_left;
  p.col_start.reserve(p.out_w + 1);
  for (std::int64_t o = 0; o < p.out_w; ++o) {
    p.col_start.push_back(static_cast<std::int64_t>(p.col_taps.size()));
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const std::int64_t col = column_of(g, backward, o, kw);
      if (col >= 0) p.col_taps.push_back({kw, col});
    }
  }
  p.col_start.push_back(static_cast<std::int64_t>(p.col_taps.size()));
  plan_tiles(g, p);
  return p;
}

// The input rows that output row r (n * out_h + oh) reads, in increasing kh; returns their count.
template <typename T>
std::int64_t row_taps(const Plan& p, const T* in, std::int64_t r, RowTap<T>* taps) {
  const std::int64_t n = r / p.out_h, o = r % p.out_h, row_size = p.in_w * p.channels;
  std::int64_t count = 0;
  for (std::int64_t kh = 0; kh < p.kernel_h; ++kh) {
    std::int64_t i = -1;
    if (!p.backward) {
      i = o * p.stride_h - p.pad_top + kh * p.dilation_h;
    } else {
      const std::int64_t t = o + p.pad_top - kh * p.dilation_h;
      if (t >= 0 && t % p.stride_h == 0) i = t / p.stride_h;
    }
    if (i >= 0 && i < p.in_h) taps[count++] = {in + (n * p.in_h + i) * row_size, kh};
  }
  return count;
}

// The vector helpers below are inlined into the clones: no vector crosses a call, so the ABI note
// on vector arguments does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// kLanes floats as one GCC vector: a zmm register with AVX-512 (explicit vectors keep that width,
// where GCC's vectorizer picks 256 bits for loops that widen 16-bit values), two ymm with AVX2.
using Lanes = float __attribute__((vector_size(kLanes * 4)));
using Bits32 = std::uint32_t __attribute__((vector_size(kLanes * 4)));
using Bits16 = std::uint16_t __attribute__((vector_size(kLanes * 2)));
using Halves = std::uint16_t __attribute__((vector_size(kLanes * 4)));  // Lanes as 16-bit halves

// kLanes values of storage type T (float or bfloat16) at p as floats (bfloat16: a 16-bit shift).
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE Lanes load_lanes(const T* p) {
  Lanes v;
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(&v, p, sizeof v);
  } else {
    static_assert(std::is_same_v<T, bfloat16>);
    // Each value into the high half of its float (one word permutation; GCC lowers a widening
    // __builtin_convertvector to 256-bit pieces, 3x the instructions).
    Bits16 h;
    std::memcpy(&h, p, sizeof h);
    const Halves wide =
        __builtin_shufflevector(Bits16{}, h, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    std::memcpy(&v, &wide, sizeof v);
  }
  return v;
}

// Stores kLanes floats to p, rounded once to T (bit-exact with simd_convert.h's float_to_bf16:
// round to nearest even, NaN kept and made quiet).
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void store_lanes(T* p, Lanes v) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(p, &v, sizeof v);
  } else {
    static_assert(std::is_same_v<T, bfloat16>);
    Bits32 b;
    std::memcpy(&b, &v, sizeof b);
    // The results in the high halves (no carry out of a non-NaN float), then those halves.
    const Bits32 rounded = b + 0x7fffu + ((b >> 16) & 1u);
    const Bits32 quiet = b | 0x00400000u;
    const Bits32 r = (b & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    Halves halves;
    std::memcpy(&halves, &r, sizeof halves);
    const Bits16 h = __builtin_shufflevector(halves, halves, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                             23, 25, 27, 29, 31);
    std::memcpy(static_cast<void*>(p), &h, sizeof h);
  }
}

MIXPREC_CPU_ALWAYS_INLINE Lanes load_floats(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Which input column, relative to the tile's first, output column j of a tile adds at tap kw, or
// -1 for none. Forward: j * S + kw. Backward data: dx column j reads dy column (P + j - kw) / S
// where S divides P + j - kw, relative to the tile's first dy column (offset by D =
// ceil((KW - 1) / S) so that every offset is >= 0).
template <bool Backward, int S, int P, int KW>
constexpr int tile_offset(int j, int kw) {
  if constexpr (!Backward) {
    return j * S + kw;
  } else {
    constexpr int D = (KW - 1 + S - 1) / S;
    const int v = P + j - kw + D * S;
    return v % S == 0 ? v / S : -1;
  }
}

// J output columns of one output row for the kLanes channels at w / bias / out (offset by the
// block's first channel); rows[r].row + col0 * C is the first input column the tile reads.
template <typename T, int KW, int S, int J, bool Backward, int P>
MIXPREC_CPU_ALWAYS_INLINE void tile(const Plan& p, const RowTap<T>* rows, std::int64_t nrows,
                                    std::int64_t col0, std::int64_t c0, T* out) {
  const std::int64_t C = p.channels;
  Lanes acc[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) acc[j] = Lanes{};
  for (std::int64_t r = 0; r < nrows; ++r) {
    const T* x = rows[r].row + col0 * C + c0;
    const float* w = p.filters + rows[r].kh * KW * C + c0;
#pragma GCC unroll 8
    for (int kw = 0; kw < KW; ++kw) {
      const Lanes wv = load_floats(w + kw * C);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) {
        const int off = tile_offset<Backward, S, P, KW>(j, kw);
        if (off >= 0) acc[j] += load_lanes(x + off * C) * wv;
      }
    }
  }
  const Lanes b = load_floats(p.bias + c0);
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) store_lanes(out + j * C + c0, acc[j] + b);
}

// One (input element, filter element) pair of a generic output column, channel 0.
template <typename T>
struct Tap {
  const T* x;
  const float* w;
};

// One output column for the G full channel blocks from c0: the sum over its taps, in order, with G
// independent sums in registers (one sum alone would wait on each multiply-add's latency).
template <typename T, int G>
MIXPREC_CPU_ALWAYS_INLINE void column_blocks(const Tap<T>* taps, std::int64_t ntaps,
                                             std::int64_t c0, const float* bias, T* y) {
  Lanes acc[G];
#pragma GCC unroll 8
  for (int k = 0; k < G; ++k) acc[k] = Lanes{};
  for (std::int64_t t = 0; t < ntaps; ++t) {
    const T* x = taps[t].x + c0;
    const float* w = taps[t].w + c0;
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) acc[k] += load_lanes(x + k * kLanes) * load_floats(w + k * kLanes);
  }
#pragma GCC unroll 8
  for (int k = 0; k < G; ++k) {
    store_lanes(y + c0 + k * kLanes, acc[k] + load_floats(bias + c0 + k * kLanes));
  }
}

// One output column for the `count` (< kLanes) channels from c0 after the last full block.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void column_tail(const Tap<T>* taps, std::int64_t ntaps, std::int64_t c0,
                                           std::int64_t count, const float* bias, T* y) {
  float acc[kLanes] = {};
  for (std::int64_t t = 0; t < ntaps; ++t) {
    const T* x = taps[t].x + c0;
    const float* w = taps[t].w + c0;
#pragma omp simd
    for (std::int64_t c = 0; c < count; ++c) acc[c] += simd::load(x + c) * w[c];
  }
#pragma omp simd
  for (std::int64_t c = 0; c < count; ++c) simd::store(y + c0 + c, acc[c] + bias[c0 + c]);
}

// The columns [begin, end) of one output row through the generic loop, channels [c_begin, C):
// per column, its (kh, kw) taps listed once (in `taps`, KH * KW entries), then every channel
// block.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void columns(const Plan& p, const RowTap<T>* rows, std::int64_t nrows,
                                       std::int64_t begin, std::int64_t end, std::int64_t c_begin,
                                       Tap<T>* taps, T* out) {
  const std::int64_t C = p.channels, KW = p.kernel_w, full = C / kLanes * kLanes;
  for (std::int64_t o = begin; o < end; ++o) {
    const ColTap* cols = p.col_taps.data() + p.col_start[o];
    const std::int64_t ncols = p.col_start[o + 1] - p.col_start[o];
    std::int64_t ntaps = 0;
    for (std::int64_t r = 0; r < nrows; ++r) {
      for (std::int64_t t = 0; t < ncols; ++t) {
        taps[ntaps++] = {rows[r].row + cols[t].col * C,
                         p.filters + (rows[r].kh * KW + cols[t].kw) * C};
      }
    }
    T* y = out + o * C;
    std::int64_t c0 = c_begin;
    for (; c0 + 8 * kLanes <= full; c0 += 8 * kLanes)
      column_blocks<T, 8>(taps, ntaps, c0, p.bias, y);
    for (; c0 + 4 * kLanes <= full; c0 += 4 * kLanes)
      column_blocks<T, 4>(taps, ntaps, c0, p.bias, y);
    for (; c0 < full; c0 += kLanes) column_blocks<T, 1>(taps, ntaps, c0, p.bias, y);
    if (c0 < C) column_tail(taps, ntaps, c0, C - c0, p.bias, y);
  }
}

// The first input column a tile starting at output column o reads (see tile_offset).
template <int S, bool Backward, int P, int KW>
MIXPREC_CPU_ALWAYS_INLINE std::int64_t tile_column(const Plan& p, std::int64_t o) {
  if constexpr (!Backward) {
    return o * S - p.pad_left;
  } else {
    constexpr int D = (KW - 1 + S - 1) / S;
    return (o + p.pad_left - P) / S - D;
  }
}

// The end of the interior columns that the tiles cover: tiles of kWideTile, then kNarrowTile.
std::int64_t tiled_end(const Plan& p) {
  const std::int64_t wide = (p.hi - p.lo) / kWideTile * kWideTile;
  return p.lo + wide + (p.hi - p.lo - wide) / kNarrowTile * kNarrowTile;
}

// One output row with the tile loops: the tiled interior columns per full channel block, the
// other columns (edges, the interior left after the tiles) and the channels after the last full
// block through the generic loop.
template <typename T, int KW, int S, bool Backward, int P>
MIXPREC_CPU_ALWAYS_INLINE void tiled_row(const Plan& p, const RowTap<T>* rows, std::int64_t nrows,
                                         Tap<T>* taps, T* out) {
  const std::int64_t C = p.channels, full = C / kLanes * kLanes, end = tiled_end(p);
  for (std::int64_t c0 = 0; c0 < full; c0 += kLanes) {
    std::int64_t o = p.lo;
    for (; o + kWideTile <= end; o += kWideTile) {
      tile<T, KW, S, kWideTile, Backward, P>(p, rows, nrows, tile_column<S, Backward, P, KW>(p, o),
                                             c0, out + o * C);
    }
    for (; o < end; o += kNarrowTile) {
      tile<T, KW, S, kNarrowTile, Backward, P>(
          p, rows, nrows, tile_column<S, Backward, P, KW>(p, o), c0, out + o * C);
    }
  }
  columns(p, rows, nrows, 0, p.lo, 0, taps, out);
  columns(p, rows, nrows, end, p.out_w, 0, taps, out);
  if (full < C) columns(p, rows, nrows, p.lo, end, full, taps, out);
}

// One output row with the tile loops for the plan's kind (plan_tiles), bfloat16 only.
MIXPREC_CPU_ALWAYS_INLINE void tiled_row_bf16(const Plan& p, const RowTap<bfloat16>* rows,
                                              std::int64_t nrows, Tap<bfloat16>* taps,
                                              bfloat16* out) {
  using T = bfloat16;
  const int key = p.kind * 4 + (p.backward ? 2 : 0) + p.phase;
  switch (key) {
    case 31 * 4: return tiled_row<T, 3, 1, false, 0>(p, rows, nrows, taps, out);
    case 32 * 4: return tiled_row<T, 3, 2, false, 0>(p, rows, nrows, taps, out);
    case 51 * 4: return tiled_row<T, 5, 1, false, 0>(p, rows, nrows, taps, out);
    case 52 * 4: return tiled_row<T, 5, 2, false, 0>(p, rows, nrows, taps, out);
    case 31 * 4 + 2: return tiled_row<T, 3, 1, true, 0>(p, rows, nrows, taps, out);
    case 32 * 4 + 2: return tiled_row<T, 3, 2, true, 0>(p, rows, nrows, taps, out);
    case 32 * 4 + 3: return tiled_row<T, 3, 2, true, 1>(p, rows, nrows, taps, out);
    case 51 * 4 + 2: return tiled_row<T, 5, 1, true, 0>(p, rows, nrows, taps, out);
    case 52 * 4 + 2: return tiled_row<T, 5, 2, true, 0>(p, rows, nrows, taps, out);
    case 52 * 4 + 3: return tiled_row<T, 5, 2, true, 1>(p, rows, nrows, taps, out);
    default: break;
  }
  columns(p, rows, nrows, 0, p.out_w, 0, taps, out);
}

// GCC's unroll-and-jam (-O3) fuses two taps of column()'s loop into its channel loop and leaves a
// scalar loop with the sums in memory (~5x slower); it is off for these functions.
#if defined(__GNUC__) && !defined(__clang__)
#define MIXPREC_NO_UNROLL_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define MIXPREC_NO_UNROLL_JAM
#endif

// The generic loop: one compiled copy per storage type, each cloned for AVX-512 / AVX2 / the
// baseline (target_clones.h).
MIXPREC_CPU_CLONES MIXPREC_NO_UNROLL_JAM void run_row(const Plan& p, const RowTap<float>* rows,
                                                      std::int64_t nrows, Tap<float>* taps,
                                                      float* out) {
  columns(p, rows, nrows, 0, p.out_w, 0, taps, out);
}
MIXPREC_CPU_CLONES MIXPREC_NO_UNROLL_JAM void run_row(const Plan& p, const RowTap<bfloat16>* rows,
                                                      std::int64_t nrows, Tap<bfloat16>* taps,
                                                      bfloat16* out) {
  columns(p, rows, nrows, 0, p.out_w, 0, taps, out);
}

// The tile loops exist only for bfloat16 and only compiled for AVX-512 (F/BW/VL: the CPU check of
// core::convert_isa(), tiles_available): float32 takes these kernels only on 2x2 output maps
// (depthwise_forward_path), where no tile fits, and bfloat16 only on an AVX-512 CPU. One copy
// instead of 2 storage types x 3 target clones cuts the compile time ~6x.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MIXPREC_DW_TILES 1
__attribute__((target("avx512f,avx512bw,avx512vl,fma"), flatten)) MIXPREC_NO_UNROLL_JAM void
run_row_tiled(const Plan& p, const RowTap<bfloat16>* rows, std::int64_t nrows, Tap<bfloat16>* taps,
              bfloat16* out) {
  tiled_row_bf16(p, rows, nrows, taps, out);
}
#else
#define MIXPREC_DW_TILES 0
#endif

// Whether this build and CPU run the bfloat16 tile loops.
bool tiles_available() {
  return MIXPREC_DW_TILES && core::convert_isa() >= core::ConvertIsa::avx512;
}

// Every output row of the pass, in parallel over fixed blocks of rows (each thread writes its own
// rows; every element's sum is the same on any thread).
template <typename T>
void run(const Plan& p, std::int64_t batch, const T* in, T* out) {
  const std::int64_t rows = batch * p.out_h;
  const std::int64_t row_size = p.out_w * p.channels;
  const std::int64_t blocks = std::min(rows, kMaxBlocks);
  const std::int64_t work = rows * row_size * p.kernel_h * p.kernel_w;
  [[maybe_unused]] const bool tiled = p.kind != 0 && tiles_available();
  parallel_for(blocks, work > kParallelWork, [&](std::int64_t b) {
    std::vector<RowTap<T>> row_list(static_cast<std::size_t>(p.kernel_h));
    std::vector<Tap<T>> taps(static_cast<std::size_t>(p.kernel_h * p.kernel_w));
    for (std::int64_t r = b * rows / blocks; r < (b + 1) * rows / blocks; ++r) {
      const std::int64_t count = row_taps(p, in, r, row_list.data());
      if constexpr (std::is_same_v<T, bfloat16>) {
#if MIXPREC_DW_TILES
        if (tiled) {
          run_row_tiled(p, row_list.data(), count, taps.data(), out + r * row_size);
          continue;
        }
#endif
      }
      run_row(p, row_list.data(), count, taps.data(), out + r * row_size);
    }
  });
}

// The filters (KH, KW, 1, C) and bias as float32: as they are for float32, widened once
// otherwise (they are small); zeros for no bias.
struct FloatParams {
  Tensor filters, bias;
};

FloatParams float_params(const Tensor& filters, const Tensor& bias32, std::int64_t channels) {
  FloatParams f;
  f.filters = filters.dtype() == DType::float32 ? filters : cpu::cast(filters, DType::float32);
  if (bias32.defined()) {
    f.bias = bias32;
  } else {
    f.bias = core::make_tensor(Shape{channels}, DType::float32, Device::cpu());
    std::fill_n(static_cast<float*>(f.bias.data_ptr()), channels, 0.0f);
  }
  return f;
}

Tensor run_pass(const Tensor& in, const Tensor& filters, const Tensor& bias32,
                const ConvGeometry& g, bool backward, const char* name) {
  if (!is_depthwise_geometry(g)) {
    throw Error(std::string("cpu::") + name + ": not a depthwise geometry (groups " +
                std::to_string(g.groups) + ", in_channels " + std::to_string(g.in_channels) +
                ", out_channels " + std::to_string(g.out_channels) + ")");
  }
  if (in.dtype() == DType::float16) {
    // float16: widened exactly to float32, computed in float32, rounded once (as oneDNN's path
    // does). Widening inside the tiles ran 2-4x slower than this: GCC leaves simd_convert's float16
    // conversions of a 16-lane block partly scalar.
    const Tensor f = cpu::cast(filters, DType::float32);
    return cpu::cast(run_pass(cpu::cast(in, DType::float32), f, bias32, g, backward, name),
                     DType::float16);
  }
  const DType dtype = in.dtype();
  const Shape out_shape = backward ? Shape{g.batch, g.in_h, g.in_w, g.in_channels}
                                   : Shape{g.batch, g.out_h, g.out_w, g.out_channels};
  Tensor out = core::make_tensor(out_shape, dtype, Device::cpu());
  const FloatParams f = float_params(filters, bias32, g.in_channels);
  Plan plan = make_plan(g, backward);
  plan.filters = static_cast<const float*>(f.filters.data_ptr());
  plan.bias = static_cast<const float*>(f.bias.data_ptr());
  core::dispatch_floating(dtype, name, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) {
      run<T>(plan, g.batch, static_cast<const T*>(in.data_ptr()), static_cast<T*>(out.data_ptr()));
    } else {
      throw Error(std::string("cpu::") + name + ": float32, float16 or bfloat16 only");
    }
  });
  return out;
}

}  // namespace

Tensor depthwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                         const ConvGeometry& g) {
  return run_pass(x, filters, bias32, g, false, "depthwise_forward");
}

Tensor depthwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g) {
  return run_pass(dy, filters, Tensor(), g, true, "depthwise_backward_data");
}

// Where ours runs (measured per call against oneDNN 2.6's brdgmm_dw / jit_dw kernels on a 2-core
// AVX-512/AMX Xeon, EfficientNet-B0's layers at 64x64, batch 32, libgomp's default wait policy,
// 2 threads): float32 (and float16, which runs as float32 on both paths) where the output maps have
// at most 4 positions (2x2: ours 0.64-0.84x oneDNN's time; on larger maps the two were within a few
// percent, or ours up to 1.6x slower on 4x4 maps with 5x5 kernels); bfloat16 backward data on
// larger output maps, on an AVX-512 CPU (ours 0.60-0.99x; 1.10-1.14x on 2x2 maps; below AVX-512
// only the generic loop runs); bfloat16 forward nowhere (ours 0.97-1.55x: the edge columns and
// the maps narrower than a tile run the generic loop).
bool depthwise_forward_path(const ConvGeometry& g, DType dtype) {
  if (!depthwise_conv_enabled() || !is_depthwise_geometry(g)) return false;
  if (dtype == DType::bfloat16) return false;
  return g.out_h * g.out_w <= kSmallOutput;
}

bool depthwise_backward_data_path(const ConvGeometry& g, DType dtype) {
  if (!depthwise_conv_enabled() || !is_depthwise_geometry(g)) return false;
  if (dtype == DType::bfloat16) return tiles_available() && g.out_h * g.out_w > kSmallOutput;
  return g.out_h * g.out_w <= kSmallOutput;
}

bool depthwise_conv_enabled() { return g_depthwise.enabled(); }

void set_depthwise_conv(std::optional<bool> enabled) { g_depthwise.set(enabled); }

}  // namespace mixprec::cpu
