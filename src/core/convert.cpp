// Bulk float32 <-> float16/bfloat16 conversion: a portable loop over the scalar conversions, an
// F16C/AVX2 path and an AVX-512 path (convert_avx512.cpp), the newest the CPU has chosen once at
// run time (tests and benchmarks can lower it: set_convert_isa_limit). The library is built without
// -mavx2/-mf16c/-mavx512*, so the fast functions carry a target attribute and are only called after
// the CPU check.
//
// All paths are bit-exact with detail::float_to_half_bits / half_bits_to_float /
// float_to_bfloat16_bits / bfloat16_bits_to_float for every input:
// - float32 -> float16: vcvtps2ph with an explicit round-to-nearest-even immediate (independent of
//   MXCSR.RC), exact subnormals, overflow to inf. A NaN keeps its sign and the top 10 payload bits
//   with the quiet bit forced on, which is what the scalar conversion does.
// - float16 -> float32: vcvtph2ps is exact and quiets a signalling NaN (IEEE 754 convertFormat);
//   the scalar conversion does the same.
// - float32 -> bfloat16: AVX2 / AVX-512 integer arithmetic, the same formula as the scalar
//   conversion; with AVX512_BF16, vcvtne2ps2bf16 except for vectors holding a float32 subnormal,
//   which it would flush to zero (convert_avx512.cpp).
// - bfloat16 -> float32: a 16-bit left shift, i.e. bfloat16 is reinterpreted as the top half of a
//   float32. This is exact and lossless, so a signalling bfloat16 NaN stays signalling (bfloat16
//   is not an IEEE interchange format; the widening is a reinterpretation, not a rounding).
#include "mixprec/convert.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/convert_kernels.h"
#include "mixprec/error.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define MIXPREC_CONVERT_X86 1
#include <immintrin.h>
#if defined(__clang__)
#include <cpuid.h>
#endif
#else
#define MIXPREC_CONVERT_X86 0
#endif

namespace mixprec::core {

bool cpu_has_f16c_avx2() {
#if MIXPREC_CONVERT_X86
  // __builtin_cpu_supports also checks that the OS saves the AVX state (XCR0). __builtin_cpu_init
  // is needed in case the first call happens during static initialisation of another unit.
  static const bool has = [] {
    __builtin_cpu_init();
#if defined(__clang__)
    // Older clang does not know the "f16c" feature string: read CPUID.1:ECX bit 29 instead. The
    // AVX2 check below covers the OS support for the YMM state F16C needs.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
    const bool f16c = __builtin_cpu_supports("f16c");
#endif
    return __builtin_cpu_supports("avx2") && f16c;
  }();
  return has;
#else
  return false;
#endif
}

namespace {

ConvertIsa detect_convert_isa() {
#if MIXPREC_CONVERT_X86
  if (!cpu_has_f16c_avx2()) return ConvertIsa::portable;
  // Like "avx2" above, "avx512f" also checks that the OS saves the ZMM and mask state (XCR0).
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl")) {
    return ConvertIsa::avx2_f16c;
  }
  // Every CPU with AVX512_BF16 so far has AVX512DQ (vfpclassps finds the subnormal inputs).
  const bool bf16 = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512dq");
  return bf16 ? ConvertIsa::avx512_bf16 : ConvertIsa::avx512;
#else
  return ConvertIsa::portable;
#endif
}

std::atomic<ConvertIsa>& active_isa() {
  static std::atomic<ConvertIsa> active{convert_isa_supported()};
  return active;
}

}  // namespace

const char* to_string(ConvertIsa isa) {
  switch (isa) {
    case ConvertIsa::portable: return "portable";
    case ConvertIsa::avx2_f16c: return "avx2_f16c";
    case ConvertIsa::avx512: return "avx512";
    case ConvertIsa::avx512_bf16: return "avx512_bf16";
  }
  return "unknown";
}

ConvertIsa convert_isa_supported() {
  static const ConvertIsa supported = detect_convert_isa();
  return supported;
}

ConvertIsa convert_isa() { return active_isa().load(std::memory_order_relaxed); }

ConvertIsa set_convert_isa_limit(ConvertIsa limit) {
  return active_isa().exchange(std::min(limit, convert_isa_supported()), std::memory_order_relaxed);
}

// ---- portable path ----

void convert_portable(const float* src, float16* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i].bits = detail::float_to_half_bits(src[i]);
}

void convert_portable(const float16* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = detail::half_bits_to_float(src[i].bits);
}

void convert_portable(const float* src, bfloat16* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i].bits = detail::float_to_bfloat16_bits(src[i]);
}

void convert_portable(const bfloat16* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = detail::bfloat16_bits_to_float(src[i].bits);
}

// ---- F16C/AVX2 path ----

namespace {

#if MIXPREC_CONVERT_X86

#define MIXPREC_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))

// Rounding immediate for vcvtps2ph: round to nearest even regardless of MXCSR.RC.
constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT;

// float16 and bfloat16 are 2-byte structs; loads and stores go through the unaligned
// (may_alias) intrinsic types, so these casts do not break strict aliasing.
template <typename T>
inline __m128i* as_m128(T* p) {
  return reinterpret_cast<__m128i*>(p);
}
template <typename T>
inline const __m128i* as_m128(const T* p) {
  return reinterpret_cast<const __m128i*>(p);
}
template <typename T>
inline __m256i* as_m256(T* p) {
  return reinterpret_cast<__m256i*>(p);
}
template <typename T>
inline const __m256i* as_m256(const T* p) {
  return reinterpret_cast<const __m256i*>(p);
}

// Main loops take 32 values (four 256-bit float vectors) per iteration so that loads, converts and
// stores of independent vectors overlap; an 8-wide loop and the portable loop finish the tail.
MIXPREC_TARGET_AVX2_F16C void f32_to_f16_avx2(const float* src, float16* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(src + i);
    const __m256 b = _mm256_loadu_ps(src + i + 8);
    const __m256 c = _mm256_loadu_ps(src + i + 16);
    const __m256 d = _mm256_loadu_ps(src + i + 24);
    _mm_storeu_si128(as_m128(dst + i), _mm256_cvtps_ph(a, kRoundNearestEven));
    _mm_storeu_si128(as_m128(dst + i + 8), _mm256_cvtps_ph(b, kRoundNearestEven));
    _mm_storeu_si128(as_m128(dst + i + 16), _mm256_cvtps_ph(c, kRoundNearestEven));
    _mm_storeu_si128(as_m128(dst + i + 24), _mm256_cvtps_ph(d, kRoundNearestEven));
  }
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(as_m128(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRoundNearestEven));
  }
  convert_portable(src + i, dst + i, n - i);
}

MIXPREC_TARGET_AVX2_F16C void f16_to_f32_avx2(const float16* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m128i a = _mm_loadu_si128(as_m128(src + i));
    const __m128i b = _mm_loadu_si128(as_m128(src + i + 8));
    const __m128i c = _mm_loadu_si128(as_m128(src + i + 16));
    const __m128i d = _mm_loadu_si128(as_m128(src + i + 24));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(b));
    _mm256_storeu_ps(dst + i + 16, _mm256_cvtph_ps(c));
    _mm256_storeu_ps(dst + i + 24, _mm256_cvtph_ps(d));
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(as_m128(src + i))));
  }
  convert_portable(src + i, dst + i, n - i);
}

// Eight float32 bit patterns -> eight bfloat16 bit patterns, each in the low half of its 32-bit
// lane. Per lane this is detail::float_to_bfloat16_bits:
//   NaN (|x| > 0x7f800000):  (x | 0x00400000) >> 16          top payload bits, quiet bit set
//   otherwise:               (x + 0x7fff + bit16(x)) >> 16    round to nearest, ties to even;
//                                                             the carry turns overflow into inf
// |x| <= 0x7fffffff, so the signed 32-bit compare is a correct unsigned compare here.
MIXPREC_TARGET_AVX2_F16C inline __m256i round_to_bf16_lanes(__m256i x) {
  const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, is_nan), 16);
}

MIXPREC_TARGET_AVX2_F16C void f32_to_bf16_avx2(const float* src, bfloat16* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round_to_bf16_lanes(_mm256_loadu_si256(as_m256(src + i)));
    const __m256i hi = round_to_bf16_lanes(_mm256_loadu_si256(as_m256(src + i + 8)));
    // Lanes hold values <= 0xffff, so the unsigned-saturating pack is exact. It works per 128-bit
    // half, giving 64-bit groups [lo0-3, hi0-3, lo4-7, hi4-7]; 0xD8 reorders them to 0,2,1,3.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(as_m256(dst + i), packed);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i r = round_to_bf16_lanes(_mm256_loadu_si256(as_m256(src + i)));
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(as_m128(dst + i), packed);
  }
  convert_portable(src + i, dst + i, n - i);
}

// Zero-extend 8 bfloat16 to 32 bits and shift them into the top half: exact widening.
MIXPREC_TARGET_AVX2_F16C void bf16_to_f32_avx2(const bfloat16* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(as_m128(src + i)));
    const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(as_m128(src + i + 8)));
    _mm256_storeu_si256(as_m256(dst + i), _mm256_slli_epi32(a, 16));
    _mm256_storeu_si256(as_m256(dst + i + 8), _mm256_slli_epi32(b, 16));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(as_m128(src + i)));
    _mm256_storeu_si256(as_m256(dst + i), _mm256_slli_epi32(a, 16));
  }
  convert_portable(src + i, dst + i, n - i);
}

// Out of place onto a 32-byte-aligned destination, the stores bypass the cache (the rounded copy
// of a kernel is read by the next matmul, not now): this saves reading every destination line
// before writing it, a third of the memory traffic of the pass.
MIXPREC_TARGET_AVX2_F16C void round_f16_avx2(const float* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  if (src != dst && reinterpret_cast<std::uintptr_t>(dst) % 32 == 0) {
    for (; i + 16 <= n; i += 16) {
      const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRoundNearestEven);
      const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), kRoundNearestEven);
      _mm256_stream_ps(dst + i, _mm256_cvtph_ps(a));
      _mm256_stream_ps(dst + i + 8, _mm256_cvtph_ps(b));
    }
    _mm_sfence();  // order the streaming stores before any later store (and the caller's reads)
  }
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRoundNearestEven);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), kRoundNearestEven);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(b));
  }
  for (; i < n; ++i) dst[i] = detail::half_bits_to_float(detail::float_to_half_bits(src[i]));
}

MIXPREC_TARGET_AVX2_F16C void round_bf16_avx2(const float* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = round_to_bf16_lanes(_mm256_loadu_si256(as_m256(src + i)));
    const __m256i b = round_to_bf16_lanes(_mm256_loadu_si256(as_m256(src + i + 8)));
    _mm256_storeu_si256(as_m256(dst + i), _mm256_slli_epi32(a, 16));
    _mm256_storeu_si256(as_m256(dst + i + 8), _mm256_slli_epi32(b, 16));
  }
  for (; i < n; ++i) {
    dst[i] = detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(src[i]));
  }
}

#undef MIXPREC_TARGET_AVX2_F16C

#endif  // MIXPREC_CONVERT_X86

void require_simd() {
  if (!cpu_has_f16c_avx2()) {
    throw Error(
        "convert_simd needs a CPU with AVX2 and F16C, but this CPU (or OS) does not provide them; "
        "use mixprec::convert, which falls back to the portable path");
  }
}

}  // namespace

#if MIXPREC_CONVERT_X86

void convert_simd(const float* src, float16* dst, std::size_t n) {
  require_simd();
  f32_to_f16_avx2(src, dst, n);
}
void convert_simd(const float16* src, float* dst, std::size_t n) {
  require_simd();
  f16_to_f32_avx2(src, dst, n);
}
void convert_simd(const float* src, bfloat16* dst, std::size_t n) {
  require_simd();
  f32_to_bf16_avx2(src, dst, n);
}
void convert_simd(const bfloat16* src, float* dst, std::size_t n) {
  require_simd();
  bf16_to_f32_avx2(src, dst, n);
}

#else

void convert_simd(const float*, float16*, std::size_t) { require_simd(); }
void convert_simd(const float16*, float*, std::size_t) { require_simd(); }
void convert_simd(const float*, bfloat16*, std::size_t) { require_simd(); }
void convert_simd(const bfloat16*, float*, std::size_t) { require_simd(); }

#endif

}  // namespace mixprec::core

namespace mixprec {

// The path is a cached atomic (one guarded load per call), cheap next to a 1024-value chunk.

void convert(const float* src, float16* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  const core::ConvertIsa isa = core::convert_isa();
  if (isa >= core::ConvertIsa::avx512) return core::avx512::f32_to_f16(src, dst, n);
  if (isa == core::ConvertIsa::avx2_f16c) return core::f32_to_f16_avx2(src, dst, n);
#endif
  core::convert_portable(src, dst, n);
}

void convert(const float16* src, float* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  const core::ConvertIsa isa = core::convert_isa();
  if (isa >= core::ConvertIsa::avx512) return core::avx512::f16_to_f32(src, dst, n);
  if (isa == core::ConvertIsa::avx2_f16c) return core::f16_to_f32_avx2(src, dst, n);
#endif
  core::convert_portable(src, dst, n);
}

void convert(const float* src, bfloat16* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  switch (core::convert_isa()) {
    case core::ConvertIsa::avx512_bf16: return core::avx512::f32_to_bf16_native(src, dst, n);
    case core::ConvertIsa::avx512: return core::avx512::f32_to_bf16(src, dst, n);
    case core::ConvertIsa::avx2_f16c: return core::f32_to_bf16_avx2(src, dst, n);
    case core::ConvertIsa::portable: break;
  }
#endif
  core::convert_portable(src, dst, n);
}

void convert(const bfloat16* src, float* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  const core::ConvertIsa isa = core::convert_isa();
  if (isa >= core::ConvertIsa::avx512) return core::avx512::bf16_to_f32(src, dst, n);
  if (isa == core::ConvertIsa::avx2_f16c) return core::bf16_to_f32_avx2(src, dst, n);
#endif
  core::convert_portable(src, dst, n);
}

void round_to_float16(const float* src, float* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  const core::ConvertIsa isa = core::convert_isa();
  if (isa >= core::ConvertIsa::avx512) return core::avx512::round_f16(src, dst, n);
  if (isa == core::ConvertIsa::avx2_f16c) return core::round_f16_avx2(src, dst, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    dst[i] = detail::half_bits_to_float(detail::float_to_half_bits(src[i]));
  }
}

void round_to_bfloat16(const float* src, float* dst, std::size_t n) {
#if MIXPREC_CONVERT_X86
  const core::ConvertIsa isa = core::convert_isa();
  if (isa >= core::ConvertIsa::avx512) return core::avx512::round_bf16(src, dst, n);
  if (isa == core::ConvertIsa::avx2_f16c) return core::round_bf16_avx2(src, dst, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    dst[i] = detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(src[i]));
  }
}

}  // namespace mixprec
