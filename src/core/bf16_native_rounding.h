// Sixteen-lane AVX-512 steps for loops that widen bfloat16 to float32, compute, and store the
// result rounded back to bfloat16 with the CPU's native instruction (AVX512_BF16's
// vcvtne2ps2bf16), bit-identical with simd_convert.h's float_to_bf16 for every value:
// vcvtne2ps2bf16 rounds to nearest even and quiets NaNs as that integer formula does, but flushes
// float32 subnormals to zero, so a vector holding a subnormal lane (vfpclassps) is rounded with the
// integer formula instead; vfpclassps is blind to subnormals while MXCSR.DAZ is set, so then the
// caller passes integer = true and every vector takes the integer formula.
//
// One definition for the bulk conversion (core/convert_avx512.cpp) and the backend's loops that
// store bfloat16 (batch norm, per-channel binary ops). The library is built without -mavx512*: the
// functions here carry a target attribute and are inlined into functions with the same one or a
// wider one: the integer formula needs AVX512F/BW/VL only (MIXPREC_AVX512_STEP), the native steps
// AVX512_BF16 too (MIXPREC_BF16_NATIVE_TARGET), which callers may run only when
// native_bf16_rounding() is true. MIXPREC_BF16_NATIVE is 0 where none of this exists (not x86-64,
// or not GCC/clang).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/convert_kernels.h"
#include "mixprec/bfloat16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MIXPREC_BF16_NATIVE 1
#include <immintrin.h>
#else
#define MIXPREC_BF16_NATIVE 0
#endif

// GCC 12's avx512fintrin.h starts masked and narrowing intrinsics from _mm*_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in GCC 13): not our code. (It
// is reported where the steps below are inlined, so the includer's file has to ignore it.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixprec::core::bf16_native {

// True when the CPU has AVX512_BF16 (+AVX512F/BW/VL/DQ) and the conversion limit allows it: the
// check behind mixprec::convert (core::convert_isa()), so tests and benchmarks can turn it off.
inline bool native_bf16_rounding() { return core::convert_isa() >= core::ConvertIsa::avx512_bf16; }

#if MIXPREC_BF16_NATIVE

#define MIXPREC_BF16_NATIVE_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define MIXPREC_BF16_NATIVE_STEP MIXPREC_BF16_NATIVE_TARGET inline __attribute__((always_inline))
#define MIXPREC_AVX512_STEP \
  __attribute__((target("avx512f,avx512bw,avx512vl"))) inline __attribute__((always_inline))

constexpr std::int64_t kLanes = 16;

// Mask of the first min(left, 16) lanes.
inline __mmask16 first_lanes(std::int64_t left) {
  return static_cast<__mmask16>((1u << std::min(left, kLanes)) - 1u);
}

// True while MXCSR.DAZ (bit 6) is set: pass it as `integer` to the stores below.
inline bool denormals_are_zero() { return (_mm_getcsr() & 0x40u) != 0; }

// Sixteen bfloat16 (the first lanes of k when Masked, zeros elsewhere) widened to float32: the
// 16 bits become the top half of the float32.
template <bool Masked>
MIXPREC_AVX512_STEP __m512 load_bf16(const bfloat16* p, __mmask16 k) {
  __m256i h;
  if constexpr (Masked) {
    h = _mm256_maskz_loadu_epi16(k, p);
  } else {
    h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Lanes holding a float32 subnormal (vfpclassps, class bit 5).
MIXPREC_BF16_NATIVE_STEP __mmask16 subnormal_lanes(__m512 v) {
  return _mm512_fpclass_ps_mask(v, 0x20);
}

// Each lane rounded to bfloat16 by simd_convert.h's integer formula, the result in the top half
// of the lane (the low half is garbage):
//   NaN (|x| > 0x7f800000):  x | 0x00400000              top payload bits, quiet bit set
//   otherwise:               x + 0x7fff + bit16(x)       round to nearest, ties to even; the
//                                                        carry turns overflow into inf
MIXPREC_AVX512_STEP __m512i bf16_in_top_half(__m512i x) {
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_mask_or_epi32(rounded, is_nan, x, _mm512_set1_epi32(0x00400000));
}

// The odd 16-bit words of two vectors (the top halves of their 32-bit lanes): lo's, then hi's.
MIXPREC_AVX512_STEP __m512i top_halves(__m512i lo, __m512i hi) {
  const __m512i odd_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(lo, odd_words, hi);
}

// Stores the lanes of v selected by k rounded to bfloat16 by the integer formula.
MIXPREC_AVX512_STEP void store16_integer(bfloat16* dst, __m512 v, __mmask16 k) {
  const __m512i rounded = bf16_in_top_half(_mm512_castps_si512(v));
  _mm256_mask_storeu_epi16(dst, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16)));
}

// Stores 32 values, a's then b's, rounded to bfloat16.
MIXPREC_BF16_NATIVE_STEP void store32(bfloat16* dst, __m512 a, __m512 b, bool integer) {
  if (!integer && (subnormal_lanes(a) | subnormal_lanes(b)) == 0) {
    // vcvtne2ps2bf16 puts its second operand in the low half of the result.
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(b, a));
  } else {
    _mm512_storeu_si512(dst, top_halves(bf16_in_top_half(_mm512_castps_si512(a)),
                                        bf16_in_top_half(_mm512_castps_si512(b))));
  }
}

// Stores the lanes of v selected by k rounded to bfloat16.
MIXPREC_BF16_NATIVE_STEP void store16(bfloat16* dst, __m512 v, __mmask16 k, bool integer) {
  if (!integer && (subnormal_lanes(v) & k) == 0) {
    _mm256_mask_storeu_epi16(dst, k, (__m256i)_mm512_cvtneps_pbh(v));
  } else {
    store16_integer(dst, v, k);
  }
}

#endif  // MIXPREC_BF16_NATIVE

}  // namespace mixprec::core::bf16_native
