// bfloat16's register-blocked depthwise backward-filters loop with AVX512_BF16 dot products; see
// depthwise_filters_bf16.h. The library is built without -mavx512*: the loop carries a target
// attribute and runs only after the CPU check (bf16_dot_in_use, i.e. core::convert_isa()).
//
// vdpbf16ps multiplies 32 bfloat16 pairs and adds each pair into one float32 lane: per lane i,
// acc += a[2i+1] * b[2i+1], then acc += a[2i] * b[2i] (Intel SDM: the odd element first; the
// product of two bfloat16 is exact in float32; round to nearest even; subnormal inputs read as
// zero and subnormal results flushed to zero, whatever MXCSR says). The pair here is one channel
// at two consecutive output columns ow, ow + 1: vpunpcklwd / vpunpckhwd interleave two columns of
// x and the same two of dy, column ow in the odd element, so that every lane adds its columns in
// increasing order, and one instruction does the work of two FMAs and their four widening ops.
// The unpacks permute the channels within each 128-bit lane, the same way for x and dy: the sums
// stay in that order while a block of rows runs and are put back once, when the block stores them.
// A tap that reads padding at one column of a pair (edge columns), and an odd column left over,
// are added on their own: widened by the same unpack with zero (the bfloat16 in the top half of
// its lane) and one FMA, the float32-FMA loop's arithmetic.
//
// So the sums equal those of depthwise_filters.cpp's float32-FMA loop bit for bit (both add the
// exact products in the same order with one rounding each), except where an input or a partial sum
// is subnormal (vdpbf16ps reads and writes those as zero: DAZ/FTZ) or where a product overflows
// float32 (which the FMA does not round on its own).
#include "backend/cpu/depthwise_filters_bf16.h"

#include <atomic>

#include "core/convert_kernels.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define MIXPREC_DW_BF16_X86 1
#include <immintrin.h>
#else
#define MIXPREC_DW_BF16_X86 0
#endif

namespace mixprec::cpu::depthwise {

namespace {

std::atomic<bool>& dot_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

}  // namespace

bool bf16_dot_in_use() {
  return MIXPREC_DW_BF16_X86 && dot_allowed().load(std::memory_order_relaxed) &&
         core::convert_isa() >= core::ConvertIsa::avx512_bf16;
}

bool set_bf16_dot_allowed(bool allowed) {
  return dot_allowed().exchange(allowed, std::memory_order_relaxed);
}

#if MIXPREC_DW_BF16_X86

namespace {

#define MIXPREC_TARGET_DW_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define MIXPREC_DW_BF16_INLINE MIXPREC_TARGET_DW_BF16 inline __attribute__((always_inline))

// 32 channels in zmm registers. After the unpacks, the lo sums' lane 4L + j (128-bit lane L,
// j < 4) holds channel 8L + j, the hi sums' lane 4L + j channel 8L + 4 + j.
struct Zmm {
  using I = __m512i;
  using F = __m512;
  static constexpr int kChannels = 32;
  static MIXPREC_DW_BF16_INLINE I load(const bfloat16* p) { return _mm512_loadu_si512(p); }
  static MIXPREC_DW_BF16_INLINE I zero() { return _mm512_setzero_si512(); }
  // Words 0-3 (lo) or 4-7 (hi) of each 128-bit lane of `even` and `odd`, interleaved.
  static MIXPREC_DW_BF16_INLINE I lo(I even, I odd) { return _mm512_unpacklo_epi16(even, odd); }
  static MIXPREC_DW_BF16_INLINE I hi(I even, I odd) { return _mm512_unpackhi_epi16(even, odd); }
  static MIXPREC_DW_BF16_INLINE F dot(F acc, I a, I b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
  }
  static MIXPREC_DW_BF16_INLINE F fma(F acc, I a, I b) {
    return _mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), acc);
  }
  // The sums of the 32 channels at p, from channel order into the unpacks' order and back.
  static MIXPREC_DW_BF16_INLINE void load_sums(const float* p, F& lo, F& hi) {
    const F a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
    lo = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27), b);
    hi = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31), b);
  }
  static MIXPREC_DW_BF16_INLINE void store_sums(float* p, F lo, F hi) {
    _mm512_storeu_ps(
        p, _mm512_permutex2var_ps(
               lo, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23), hi));
    _mm512_storeu_ps(
        p + 16,
        _mm512_permutex2var_ps(
            lo, _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31),
            hi));
  }
};

// 16 channels in ymm registers: lo's lane 4L + j holds channel 8L + j, hi's 8L + 4 + j (L < 2).
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr int kChannels = 16;
  static MIXPREC_DW_BF16_INLINE I load(const bfloat16* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static MIXPREC_DW_BF16_INLINE I zero() { return _mm256_setzero_si256(); }
  static MIXPREC_DW_BF16_INLINE I lo(I even, I odd) { return _mm256_unpacklo_epi16(even, odd); }
  static MIXPREC_DW_BF16_INLINE I hi(I even, I odd) { return _mm256_unpackhi_epi16(even, odd); }
  static MIXPREC_DW_BF16_INLINE F dot(F acc, I a, I b) {
    return _mm256_dpbf16_ps(acc, (__m256bh)a, (__m256bh)b);
  }
  static MIXPREC_DW_BF16_INLINE F fma(F acc, I a, I b) {
    return _mm256_fmadd_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), acc);
  }
  static MIXPREC_DW_BF16_INLINE void load_sums(const float* p, F& lo, F& hi) {
    const F a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    lo = _mm256_permute2f128_ps(a, b, 0x20);  // channels 0-3, 8-11
    hi = _mm256_permute2f128_ps(a, b, 0x31);  // channels 4-7, 12-15
  }
  static MIXPREC_DW_BF16_INLINE void store_sums(float* p, F lo, F hi) {
    _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
};

// The sums of KW taps for G groups of V::kChannels channels, lo and hi halves.
template <typename V, int KW, int G>
using Sums = typename V::F[KW][G][2];

// sums += x * d for one column on its own: x and d widened to float32 in the unpacks' order.
template <typename V>
MIXPREC_DW_BF16_INLINE void single(typename V::F (&sums)[2], const bfloat16* x, typename V::I d) {
  const typename V::I z = V::zero(), xv = V::load(x);
  sums[0] = V::fma(sums[0], V::lo(z, xv), V::lo(z, d));
  sums[1] = V::fma(sums[1], V::hi(z, xv), V::hi(z, d));
}

// sums += x0 * d0 + x1 * d1 (column ow's product first) for one tap at a column pair.
template <typename V>
MIXPREC_DW_BF16_INLINE void pair(typename V::F (&sums)[2], const bfloat16* x0, const bfloat16* x1,
                                 typename V::I d0, typename V::I d1) {
  const typename V::I a = V::load(x0), b = V::load(x1);
  sums[0] = V::dot(sums[0], V::lo(b, a), V::lo(d1, d0));
  sums[1] = V::dot(sums[1], V::hi(b, a), V::hi(d1, d0));
}

// The interior column pair (ow, ow + 1): x at column ow's first tap (column ow + 1's is S
// columns on), dy at column ow; every tap reads inside the row.
template <typename V, int KW, int S, int G>
MIXPREC_DW_BF16_INLINE void interior_pair(Sums<V, KW, G>& s, const bfloat16* x, const bfloat16* dy,
                                          std::int64_t C) {
#pragma GCC unroll 2
  for (int grp = 0; grp < G; ++grp) {
    const bfloat16* xc = x + grp * V::kChannels;
    const typename V::I d0 = V::load(dy + grp * V::kChannels);
    const typename V::I d1 = V::load(dy + C + grp * V::kChannels);
#pragma GCC unroll 8
    for (int kw = 0; kw < KW; ++kw) pair<V>(s[kw][grp], xc + kw * C, xc + (kw + S) * C, d0, d1);
  }
}

// x's columns (at, at + C) of the G channel groups, interleaved (column `at` in the odd elements).
template <typename V, int G>
MIXPREC_DW_BF16_INLINE void interleave(typename V::I (&lo)[G], typename V::I (&hi)[G],
                                       const bfloat16* at, std::int64_t C) {
#pragma GCC unroll 2
  for (int grp = 0; grp < G; ++grp) {
    const typename V::I a = V::load(at + grp * V::kChannels);
    const typename V::I b = V::load(at + C + grp * V::kChannels);
    lo[grp] = V::lo(b, a), hi[grp] = V::hi(b, a);
  }
}

// `pairs` interior column pairs at stride 1 from x (the first pair's first tap) and dy (its first
// column). Tap kw + 2 of one pair reads the columns of tap kw at the next, so each pair interleaves
// only two new pairs of x columns and moves the others down: fewer unpacks, which bound this loop
// more than the dot products do.
template <typename V, int KW, int G>
MIXPREC_DW_BF16_INLINE void interior_run_s1(Sums<V, KW, G>& s, const bfloat16* x,
                                            const bfloat16* dy, std::int64_t C,
                                            std::int64_t pairs) {
  if (pairs <= 0) return;              // x may have no interior column to read
  typename V::I xl[KW][G], xh[KW][G];  // tap kw: columns ow + kw and ow + kw + 1, interleaved
#pragma GCC unroll 8
  for (int kw = 0; kw + 2 < KW; ++kw) interleave<V, G>(xl[kw], xh[kw], x + kw * C, C);
  for (std::int64_t i = 0; i < pairs; ++i, x += 2 * C, dy += 2 * C) {
    interleave<V, G>(xl[KW - 2], xh[KW - 2], x + (KW - 2) * C, C);
    interleave<V, G>(xl[KW - 1], xh[KW - 1], x + (KW - 1) * C, C);
#pragma GCC unroll 2
    for (int grp = 0; grp < G; ++grp) {
      const typename V::I d0 = V::load(dy + grp * V::kChannels);
      const typename V::I d1 = V::load(dy + C + grp * V::kChannels);
      const typename V::I dl = V::lo(d1, d0), dh = V::hi(d1, d0);
#pragma GCC unroll 8
      for (int kw = 0; kw < KW; ++kw) {
        s[kw][grp][0] = V::dot(s[kw][grp][0], xl[kw][grp], dl);
        s[kw][grp][1] = V::dot(s[kw][grp][1], xh[kw][grp], dh);
      }
    }
#pragma GCC unroll 8
    for (int kw = 0; kw + 2 < KW; ++kw) {
#pragma GCC unroll 2
      for (int grp = 0; grp < G; ++grp)
        xl[kw][grp] = xl[kw + 2][grp], xh[kw][grp] = xh[kw + 2][grp];
    }
  }
}

// The column pair (ow, ow + 1), or column ow alone (last), where some taps read padding: each
// tap adds the columns whose input column iw (first_iw + kw at column ow) is inside the row, so
// that padding adds nothing (not even 0 * inf).
template <typename V, int KW, int S, int G>
MIXPREC_DW_BF16_INLINE void edge_columns(Sums<V, KW, G>& s, const bfloat16* x_row,
                                         const bfloat16* dy, std::int64_t first_iw,
                                         std::int64_t in_w, std::int64_t C, bool last) {
#pragma GCC unroll 2
  for (int grp = 0; grp < G; ++grp) {
    const std::int64_t c = grp * V::kChannels;
    const typename V::I d0 = V::load(dy + c), d1 = last ? d0 : V::load(dy + C + c);
    // Unrolled, so that every sum is a register (an index known at run time only would keep them
    // all in memory).
#pragma GCC unroll 8
    for (int kw = 0; kw < KW; ++kw) {
      const std::int64_t iw0 = first_iw + kw, iw1 = iw0 + S;
      const bool in0 = iw0 >= 0 && iw0 < in_w, in1 = !last && iw1 >= 0 && iw1 < in_w;
      if (in0 && in1) {
        pair<V>(s[kw][grp], x_row + iw0 * C + c, x_row + iw1 * C + c, d0, d1);
      } else if (in0) {
        single<V>(s[kw][grp], x_row + iw0 * C + c, d0);
      } else if (in1) {
        single<V>(s[kw][grp], x_row + iw1 * C + c, d1);
      }
    }
  }
}

// One input row x_row and output row dy_row: the columns in pairs from column 0, the pairs inside
// [p.lo, p.hi) without checks.
template <typename V, int KW, int S, int G>
MIXPREC_DW_BF16_INLINE void one_row(Sums<V, KW, G>& s, const bfloat16* x_row,
                                    const bfloat16* dy_row, const ConvGeometry& g,
                                    const RowPlan& p) {
  const std::int64_t C = g.in_channels;
  std::int64_t ow = 0;
  for (; ow + 1 < g.out_w && ow < p.lo; ow += 2) {
    edge_columns<V, KW, S, G>(s, x_row, dy_row + ow * C, ow * S - g.pad_left, g.in_w, C, false);
  }
  if constexpr (S == 1) {
    const std::int64_t pairs = ow + 1 < p.hi ? (p.hi - ow) / 2 : 0;
    interior_run_s1<V, KW, G>(s, x_row + (ow - g.pad_left) * C, dy_row + ow * C, C, pairs);
    ow += 2 * pairs;
  } else {
    for (; ow + 1 < p.hi; ow += 2) {
      interior_pair<V, KW, S, G>(s, x_row + (ow * S - g.pad_left) * C, dy_row + ow * C, C);
    }
  }
  for (; ow + 1 < g.out_w; ow += 2) {
    edge_columns<V, KW, S, G>(s, x_row, dy_row + ow * C, ow * S - g.pad_left, g.in_w, C, false);
  }
  if (ow < g.out_w) {
    edge_columns<V, KW, S, G>(s, x_row, dy_row + ow * C, ow * S - g.pad_left, g.in_w, C, true);
  }
}

// The rows of `rows` for the G * V::kChannels channels at x / dy / acc (offset by the block's first
// channel): the sums stay in registers over all rows (RowSpan::for_each's stepping; a lambda would
// not carry the target attribute).
template <typename V, int KW, int S, int G>
MIXPREC_TARGET_DW_BF16 void blocked_taps(const bfloat16* x, const bfloat16* dy,
                                         const ConvGeometry& g, const RowPlan& p,
                                         const RowSpan& rows, float* acc) {
  const std::int64_t C = g.in_channels;
  Sums<V, KW, G> s;
  for (int kw = 0; kw < KW; ++kw) {
    for (int grp = 0; grp < G; ++grp) {
      V::load_sums(acc + kw * C + grp * V::kChannels, s[kw][grp][0], s[kw][grp][1]);
    }
  }
  if (rows.r0 < rows.r1) {
    std::int64_t n = rows.r0 / g.out_h, oh = rows.r0 % g.out_h;
    const std::int64_t offset = rows.kh * g.dilation_h - g.pad_top;  // ih = oh * stride_h + offset
    for (std::int64_t r = rows.r0; r < rows.r1; ++r) {
      const std::int64_t ih = oh * g.stride_h + offset;
      if (ih >= 0 && ih < g.in_h) {  // else zero padding
        one_row<V, KW, S, G>(s, x + (n * g.in_h + ih) * g.in_w * C, dy + r * g.out_w * C, g, p);
      }
      if (++oh == g.out_h) oh = 0, ++n;
    }
  }
  for (int kw = 0; kw < KW; ++kw) {
    for (int grp = 0; grp < G; ++grp) {
      V::store_sums(acc + kw * C + grp * V::kChannels, s[kw][grp][0], s[kw][grp][1]);
    }
  }
}

// blocked_taps over the blocks of G * V::kChannels channels from c_begin; returns the first
// channel left.
template <typename V, int KW, int S, int G>
std::int64_t blocked_range(const bfloat16* x, const bfloat16* dy, const ConvGeometry& g,
                           const RowPlan& p, const RowSpan& rows, std::int64_t c_begin,
                           float* acc) {
  constexpr int kBlock = G * V::kChannels;
  std::int64_t c0 = c_begin;
  for (; c0 + kBlock <= g.in_channels; c0 += kBlock) {
    blocked_taps<V, KW, S, G>(x + c0, dy + c0, g, p, rows, acc + c0);
  }
  return c0;
}

// The float32-FMA loop's channel blocks: 64 (12 zmm sums) at width 3, 32 (10 zmm sums) at
// width 5, then one of 32 and one of 16 (ymm) for what is left.
template <int KW, int S>
std::int64_t blocked_channels(const bfloat16* x, const bfloat16* dy, const ConvGeometry& g,
                              const RowPlan& p, const RowSpan& rows, float* acc) {
  std::int64_t c0 = 0;
  if constexpr (KW == 3) c0 = blocked_range<Zmm, KW, S, 2>(x, dy, g, p, rows, c0, acc);
  c0 = blocked_range<Zmm, KW, S, 1>(x, dy, g, p, rows, c0, acc);
  return blocked_range<Ymm, KW, S, 1>(x, dy, g, p, rows, c0, acc);
}

}  // namespace

std::int64_t blocked_channels_bf16_dot(const bfloat16* x, const bfloat16* dy, const ConvGeometry& g,
                                       const RowPlan& p, const RowSpan& rows, float* acc) {
  static_assert(kWideBlock == Zmm::kChannels && kNarrowBlock == Ymm::kChannels);
  switch (p.kind) {
    case 31: return blocked_channels<3, 1>(x, dy, g, p, rows, acc);
    case 32: return blocked_channels<3, 2>(x, dy, g, p, rows, acc);
    case 51: return blocked_channels<5, 1>(x, dy, g, p, rows, acc);
    case 52: return blocked_channels<5, 2>(x, dy, g, p, rows, acc);
    default: return 0;
  }
}

#else

std::int64_t blocked_channels_bf16_dot(const bfloat16*, const bfloat16*, const ConvGeometry&,
                                       const RowPlan&, const RowSpan&, float*) {
  return 0;  // never called: bf16_dot_in_use() is false
}

#endif

}  // namespace mixprec::cpu::depthwise
