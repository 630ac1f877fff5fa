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

#include "core/bf16_native_rounding.h"
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

using bf16_native::bf16_in_top_half;
using bf16_native::first_lanes;
using bf16_native::top_halves;

#define MIXPREC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define MIXPREC_TARGET_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Rounding immediate for vcvtps2ph: round to nearest even regardless of MXCSR.RC.
constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT;

// float16/bfloat16 are 2-byte structs; the unaligned load/store intrinsics take void pointers.
template <typename T>
inline void* vp(T* p) {
  return static_cast<void*>(p);
}
template <typename T>
inline const void* vp(const T* p) {
  return static_cast<const void*>(p);
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
  _mm512_mask_storeu_ps(dst, k, bf16_native::load_bf16<true>(src, k));
}

MIXPREC_TARGET_AVX512 void bf16_to_f32(const bfloat16* src, float* dst, std::size_t n) {
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16)
    bf16_to_f32_part(src + i, dst + i, first_lanes(head - i));
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    for (std::size_t j = i; j < i + 64; j += 16) {
      _mm512_storeu_ps(dst + j, bf16_native::load_bf16<false>(src + j, 0));
    }
  }
  for (; i < n; i += 16) bf16_to_f32_part(src + i, dst + i, first_lanes(n - i));
}

MIXPREC_TARGET_AVX512 inline void f32_to_bf16_part(const float* src, bfloat16* dst, __mmask16 k) {
  bf16_native::store16_integer(dst, _mm512_maskz_loadu_ps(k, src), k);
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

// bf16_native_rounding.h's steps (vcvtne2ps2bf16, the integer formula for a vector with a
// subnormal lane); with MXCSR.DAZ on, which blinds their subnormal check, the integer formula does
// it all.
MIXPREC_TARGET_AVX512_BF16 void f32_to_bf16_native(const float* src, bfloat16* dst, std::size_t n) {
  if (bf16_native::denormals_are_zero()) return f32_to_bf16(src, dst, n);
  const std::size_t head = until_aligned(dst, n);
  for (std::size_t i = 0; i < head; i += 16) {
    const __mmask16 k = first_lanes(head - i);  // masked-off lanes load as +0
    bf16_native::store16(dst + i, _mm512_maskz_loadu_ps(k, src + i), k, false);
  }
  std::size_t i = head;
  for (; i + 32 <= n; i += 32) {
    bf16_native::store32(dst + i, _mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16), false);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    bf16_native::store16(dst + i, _mm512_maskz_loadu_ps(k, src + i), k, false);
  }
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
