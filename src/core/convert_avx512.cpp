// AVX-512 bulk conversions float32 <-> float16/bfloat16 (the third path behind mixprec::convert,
// core/convert_kernels.h). The library is built without -mavx512*: every function here carries a
// target attribute and convert.cpp calls it only after the CPU check (convert_isa()).
//
// Bit-exact with the scalar conversions for every input, like the AVX2 path (see convert.cpp):
// - float16 <-> float32: vcvtps2ph / vcvtph2ps on 512-bit vectors, round-to-nearest-even immediate.
// - bfloat16 -> float32: zero-extend to 32 bits and shift into the top half.
// - float32 -> bfloat16 with AVX512F only: the integer formula of the scalar conversion.
// - float32 -> bfloat16 with AVX512_BF16 (+ AVX512DQ): vcvtne2ps2bf16 rounds to nearest even
//   and quiets NaNs (sign and top payload bits kept) like the scalar conversion, but treats
//   float32 subnormal inputs as zero (it ignores MXCSR, DAZ is implied). A vector with a subnormal
//   lane is converted with the integer formula instead, which rounds subnormals to bfloat16
//   subnormals. The lanes are found with vfpclassps, which MXCSR.DAZ blinds: with DAZ on, the
//   integer formula does it all.
// Heads (until the destination is 64-byte aligned) and tails use masked loads and stores, so
// nothing outside [0, n) is read or written.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/convert_kernels.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// GCC 12's avx512fintrin.h starts masked and narrowing intrinsics from _mm*_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in GCC 13): not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixprec::core::avx512 {

namespace {

#define MIXPREC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define MIXPREC_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Rounding immediate for vcvtps2ph: round to nearest even regardless of MXCSR.RC.
constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT;

// Mask of the first min(left, 16) lanes.
inline __mmask16 first_lanes(std::size_t left) {
  return static_cast<__mmask16>((1u << std::min<std::size_t>(left, 16)) - 1u);
}

// float16/bfloat16 are 2-byte structs; the unaligned load/store intrinsics take void pointers.
template <typename T>
inline void* vp(T* p) {
  return static_cast<void*>(p);
}
template <typename T>
inline const void* vp(const T* p) {
  return static_cast<const void*>(p);
}

// Sixteen float32 bit patterns rounded to bfloat16, the result in the top half of each lane (the
// low half is garbage). Per lane this is detail::float_to_bfloat16_bits:
//   NaN (|x| > 0x7f800000):  x | 0x00400000              top payload bits, quiet bit set
//   otherwise:               x + 0x7fff + bit16(x)       round to nearest, ties to even; the
//                                                        carry turns overflow into inf
MIXPREC_TARGET_AVX512 inline __m512i bf16_in_top_half(__m512i x) {
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_mask_or_epi32(rounded, is_nan, x, _mm512_set1_epi32(0x00400000));
}

// The odd 16-bit words of two vectors (the top halves of their 32-bit lanes): lo's, then hi's.
MIXPREC_TARGET_AVX512 inline __m512i top_halves(__m512i lo, __m512i hi) {
  const __m512i odd_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(lo, odd_words, hi);
}

// Lanes holding a float32 subnormal (exponent field 0, mantissa not 0). vfpclassps (AVX512DQ) is
// one instruction instead of the three of an integer range check, which made the check cost more
// than the conversion (in L1: 0.036 vs 0.055 ns per value, 0.024 without a check). It honours
// MXCSR.DAZ (a subnormal then classifies as zero), so it is only used while DAZ is off.
MIXPREC_TARGET_AVX512_BF16 inline __mmask16 subnormal_lanes(__m512i x) {
  constexpr int kDenormal = 0x20;
  return _mm512_fpclass_ps_mask(_mm512_castsi512_ps(x), kDenormal);
}

// Stores the bfloat16 of the first lanes of `rounded` (bf16_in_top_half) selected by k.
MIXPREC_TARGET_AVX512 inline void store_top_halves(bfloat16* dst, __mmask16 k, __m512i rounded) {
  _mm256_mask_storeu_epi16(vp(dst), k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16)));
}

}  // namespace

// Each kernel below runs masked steps of up to 16 values until the destination is 64-byte
// aligned (a 64-byte store that straddles two cache lines costs about twice as much: 1.7x the time
// per value in L1 with the destination 16 bytes off), an unmasked main loop, and masked steps for
// the tail.

// Values before `dst` reaches a 64-byte boundary, at most n (0 if dst is not element-aligned).
template <typename T>
inline std::size_t until_aligned(const T* dst, std::size_t n) {
  const auto address = reinterpret_cast<std::uintptr_t>(dst);
  if (address % sizeof(T) != 0) return 0;
  return std::min(n, (64 - address % 64) % 64 / sizeof(T));
}

MIXPREC_TARGET_AVX512 inline void f32_to_f16_part(const float* src, float16* dst, __mmask16 k) {
  const __m512 v = _mm512_maskz_loadu_ps(k, src);
  _mm256_mask_storeu_epi16(vp(dst), k, _mm512_cvtps_ph(v, kRoundNearestEven));
}

MIXPREC_TARGET_AVX512 void f32_to_f16(const float* src, float16* dst, std::size_t n) {
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    f32_to_f16_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    for (std::size_t j = i; j < i + 64; j += 16) {
      _mm256_storeu_si256(static_cast<__m256i*>(vp(dst + j)),
                          _mm512_cvtps_ph(_mm512_loadu_ps(src + j), kRoundNearestEven));
    }
  }
  for (; i < n; i += 16) f32_to_f16_part(src + i, dst + i, first_lanes(n - i));
}

MIXPREC_TARGET_AVX512 inline void f16_to_f32_part(const float16* src, float* dst, __mmask16 k) {
  const __m256i h = _mm256_maskz_loadu_epi16(k, vp(src));
  _mm512_mask_storeu_ps(dst, k, _mm512_cvtph_ps(h));
}

MIXPREC_TARGET_AVX512 void f16_to_f32(const float16* src, float* dst, std::size_t n) {
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    f16_to_f32_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    for (std::size_t j = i; j < i + 64; j += 16) {
      const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(vp(src + j)));
      _mm512_storeu_ps(dst + j, _mm512_cvtph_ps(h));
    }
  }
  for (; i < n; i += 16) f16_to_f32_part(src + i, dst + i, first_lanes(n - i));
}

MIXPREC_TARGET_AVX512 inline void bf16_to_f32_part(const bfloat16* src, float* dst, __mmask16 k) {
  const __m256i h = _mm256_maskz_loadu_epi16(k, vp(src));
  _mm512_mask_storeu_epi32(vp(dst), k, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

MIXPREC_TARGET_AVX512 void bf16_to_f32(const bfloat16* src, float* dst, std::size_t n) {
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    bf16_to_f32_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    for (std::size_t j = i; j < i + 64; j += 16) {
      const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(vp(src + j)));
      _mm512_storeu_si512(vp(dst + j), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
  for (; i < n; i += 16) bf16_to_f32_part(src + i, dst + i, first_lanes(n - i));
}

MIXPREC_TARGET_AVX512 inline void f32_to_bf16_part(const float* src, bfloat16* dst, __mmask16 k) {
  store_top_halves(dst, k, bf16_in_top_half(_mm512_maskz_loadu_epi32(k, vp(src))));
}

MIXPREC_TARGET_AVX512 void f32_to_bf16(const float* src, bfloat16* dst, std::size_t n) {
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    f32_to_bf16_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = bf16_in_top_half(_mm512_loadu_si512(vp(src + i)));
    const __m512i b = bf16_in_top_half(_mm512_loadu_si512(vp(src + i + 16)));
    _mm512_storeu_si512(vp(dst + i), top_halves(a, b));
  }
  for (; i < n; i += 16) f32_to_bf16_part(src + i, dst + i, first_lanes(n - i));
}

MIXPREC_TARGET_AVX512_BF16 inline void f32_to_bf16_native_part(const float* src, bfloat16* dst,
                                                               __mmask16 k) {
  const __m512i v = _mm512_maskz_loadu_epi32(k, vp(src));  // masked-off lanes are +0
  if (subnormal_lanes(v) == 0) {
    _mm256_mask_storeu_epi16(vp(dst), k, (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(v)));
  } else {
    store_top_halves(dst, k, bf16_in_top_half(v));
  }
}

MIXPREC_TARGET_AVX512_BF16 void f32_to_bf16_native(const float* src, bfloat16* dst, std::size_t n) {
  constexpr unsigned kDenormalsAreZero = 0x40;  // MXCSR bit 6
  if ((_mm_getcsr() & kDenormalsAreZero) != 0) return f32_to_bf16(src, dst, n);
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    f32_to_bf16_native_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = _mm512_loadu_si512(vp(src + i));
    const __m512i b = _mm512_loadu_si512(vp(src + i + 16));
    if ((subnormal_lanes(a) | subnormal_lanes(b)) == 0) {
      // vcvtne2ps2bf16 puts its second operand in the low half of the result.
      const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(b), _mm512_castsi512_ps(a));
      _mm512_storeu_si512(vp(dst + i), (__m512i)r);
    } else {
      _mm512_storeu_si512(vp(dst + i), top_halves(bf16_in_top_half(a), bf16_in_top_half(b)));
    }
  }
  for (; i < n; i += 16) f32_to_bf16_native_part(src + i, dst + i, first_lanes(n - i));
}

// As in the AVX2 path: out of place onto a 64-byte-aligned destination the stores bypass the cache.
MIXPREC_TARGET_AVX512 void round_f16(const float* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  if (src != dst && reinterpret_cast<std::uintptr_t>(dst) % 64 == 0) {
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRoundNearestEven);
      _mm512_stream_ps(dst + i, _mm512_cvtph_ps(h));
    }
    _mm_sfence();  // order the streaming stores before any later store (and the caller's reads)
  }
  for (; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, src + i), kRoundNearestEven);
    _mm512_mask_storeu_ps(dst + i, k, _mm512_cvtph_ps(h));
  }
}

MIXPREC_TARGET_AVX512 void round_bf16(const float* src, float* dst, std::size_t n) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    const __m512i r = bf16_in_top_half(_mm512_maskz_loadu_epi32(k, vp(src + i)));
    _mm512_mask_storeu_epi32(vp(dst + i), k, _mm512_and_si512(r, top));
  }
}

#undef MIXPREC_TARGET_AVX512
#undef MIXPREC_TARGET_AVX512_BF16

}  // namespace mixprec::core::avx512

#endif
