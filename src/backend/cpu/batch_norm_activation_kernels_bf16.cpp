// The native-bfloat16 batch-norm loops of batch_norm_activation_kernels_bf16.h: forward and
// backward_dx for bfloat16 storage and the activations none, relu and relu6, in AVX-512
// intrinsics with vcvtne2ps2bf16 for the rounding. The library is built without -mavx512*: every
// function here carries a target attribute and is handed out only after the CPU check
// (core::convert_isa(), the one behind mixprec::convert).
//
// Bit-identical with the compiled loops of batch_norm_activation_kernels.cpp for every input:
// - the float32 arithmetic is the same operations in the same order ((x - mean) * scale + shift;
//   k * ((dz - p) - (x - mean) * q)), each rounded once (contraction is off here as there, and
//   the intrinsics below are separate multiplies and adds, never FMA);
// - the activations and derivatives are the same comparisons: every comparison with NaN is false
//   (ordered predicates), relu keeps NaN explicitly, relu6 keeps it by falling through, and a
//   derivative multiplies g by 1 or 0 so that a NaN or infinite g propagates;
// - vcvtne2ps2bf16 rounds to nearest even and quiets NaNs (sign and top payload bits kept) as the
//   integer formula does, but flushes float32 subnormals to zero: a vector with a subnormal lane
//   (vfpclassps) is rounded with the integer formula instead. vfpclassps is blind to subnormals
//   while MXCSR.DAZ is set, so then every vector takes the integer formula.
// Tails are masked loads and stores: nothing outside [0, n) is read or written.
#pragma GCC optimize("fp-contract=off")

#include "backend/cpu/batch_norm_activation_kernels_bf16.h"

#include <algorithm>
#include <cstdint>

#include "core/convert_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MIXPREC_BN_NATIVE_BF16 1
#include <immintrin.h>
#else
#define MIXPREC_BN_NATIVE_BF16 0
#endif

// GCC 12's avx512fintrin.h starts masked and narrowing intrinsics from _mm*_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in GCC 13): not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixprec::cpu::bn_kernels {

#if MIXPREC_BN_NATIVE_BF16
namespace {

#define MIXPREC_BN_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define MIXPREC_BN_STEP MIXPREC_BN_TARGET inline __attribute__((always_inline))

constexpr std::int64_t kLanes = 16;

// Mask of the first min(left, 16) lanes.
inline __mmask16 first_lanes(std::int64_t left) {
  return static_cast<__mmask16>((1u << std::min(left, kLanes)) - 1u);
}

// True while MXCSR.DAZ (bit 6) is set.
inline bool denormals_are_zero() { return (_mm_getcsr() & 0x40u) != 0; }

// Sixteen bfloat16 (the first lanes of k when Masked, zeros elsewhere) widened to float32: the
// 16 bits become the top half of the float32.
template <bool Masked>
MIXPREC_BN_STEP __m512 load_bf16(const bfloat16* p, __mmask16 k) {
  __m256i h;
  if constexpr (Masked) {
    h = _mm256_maskz_loadu_epi16(k, p);
  } else {
    h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <bool Masked>
MIXPREC_BN_STEP __m512 load_f32(const float* p, __mmask16 k) {
  if constexpr (Masked) {
    return _mm512_maskz_loadu_ps(k, p);
  } else {
    return _mm512_loadu_ps(p);
  }
}

// Lanes holding a float32 subnormal (vfpclassps, class bit 5).
MIXPREC_BN_STEP __mmask16 subnormal_lanes(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x20); }

// The bfloat16 bits of each lane (in its low 16 bits) by simd_convert.h's integer formula:
// NaN: the top half with the quiet bit set; otherwise x + 0x7fff + bit16(x), the top half.
MIXPREC_BN_STEP __m512i integer_bf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i top = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
  return _mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x0040));
}

// Stores 32 values a (first) and b rounded to bfloat16.
MIXPREC_BN_STEP void store32(bfloat16* dst, __m512 a, __m512 b, bool integer) {
  if (!integer && (subnormal_lanes(a) | subnormal_lanes(b)) == 0) {
    // vcvtne2ps2bf16 puts its second operand in the low half of the result.
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(b, a));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(integer_bf16(a)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kLanes),
                        _mm512_cvtepi32_epi16(integer_bf16(b)));
  }
}

// Stores the lanes of v selected by k rounded to bfloat16.
MIXPREC_BN_STEP void store16(bfloat16* dst, __m512 v, __mmask16 k, bool integer) {
  if (!integer && (subnormal_lanes(v) & k) == 0) {
    _mm256_mask_storeu_epi16(dst, k, (__m256i)_mm512_cvtneps_pbh(v));
  } else {
    _mm256_mask_storeu_epi16(dst, k, _mm512_cvtepi32_epi16(integer_bf16(v)));
  }
}

// activate<A> of batch_norm_activation_kernels.cpp, lane by lane.
template <Act A>
MIXPREC_BN_STEP __m512 activate(__m512 v) {
  const __m512 zero = _mm512_setzero_ps();
  if constexpr (A == Act::relu) {
    // v > 0 || v != v ? v : 0
    const __mmask16 keep =
        _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_maskz_mov_ps(keep, v);
  } else if constexpr (A == Act::relu6) {
    // v < 0 ? 0 : (v > 6 ? 6 : v)
    const __m512 six = _mm512_set1_ps(6.0f);
    const __m512 upper = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, six, _CMP_GT_OQ), six);
    return _mm512_mask_mov_ps(upper, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);
  } else {
    return v;
  }
}

// derivative<A>(v, g) of batch_norm_activation_kernels.cpp: g * (1 or 0).
template <Act A>
MIXPREC_BN_STEP __m512 derivative(__m512 v, __m512 g) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 one = _mm512_set1_ps(1.0f);
  if constexpr (A == Act::relu) {
    return _mm512_mul_ps(g, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), one));
  } else if constexpr (A == Act::relu6) {
    const __mmask16 inside = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ) &
                             _mm512_cmp_ps_mask(v, _mm512_set1_ps(6.0f), _CMP_LT_OQ);
    return _mm512_mul_ps(g, _mm512_maskz_mov_ps(inside, one));
  } else {
    return g;
  }
}

// act((x - mean) * scale + shift) for the 16 elements from i.
template <Act A, bool Masked>
MIXPREC_BN_STEP __m512 forward16(const bfloat16* x, const Coefficients& c, std::int64_t i,
                                 __mmask16 k) {
  const __m512 d = _mm512_sub_ps(load_bf16<Masked>(x + i, k), load_f32<Masked>(c.mean + i, k));
  const __m512 scaled = _mm512_mul_ps(d, load_f32<Masked>(c.scale + i, k));
  return activate<A>(_mm512_add_ps(scaled, load_f32<Masked>(c.shift + i, k)));
}

// k * (dz - p - (x - mean) * q), dz = dy * act'((x - mean) * scale + shift), from i.
template <Act A, bool Masked>
MIXPREC_BN_STEP __m512 backward_dx16(const bfloat16* dy, const bfloat16* x, const Coefficients& c,
                                     std::int64_t i, __mmask16 k) {
  const __m512 d = _mm512_sub_ps(load_bf16<Masked>(x + i, k), load_f32<Masked>(c.mean + i, k));
  const __m512 scaled = _mm512_mul_ps(d, load_f32<Masked>(c.scale + i, k));
  const __m512 pre = _mm512_add_ps(scaled, load_f32<Masked>(c.shift + i, k));
  const __m512 dz = derivative<A>(pre, load_bf16<Masked>(dy + i, k));
  const __m512 centred = _mm512_sub_ps(dz, load_f32<Masked>(c.p + i, k));
  const __m512 dq = _mm512_mul_ps(d, load_f32<Masked>(c.q + i, k));
  return _mm512_mul_ps(load_f32<Masked>(c.k + i, k), _mm512_sub_ps(centred, dq));
}

template <Act A>
MIXPREC_BN_TARGET void forward(const bfloat16* x, std::int64_t n, const Coefficients& c,
                               bfloat16* y) {
  const bool integer = denormals_are_zero();
  constexpr __mmask16 all = 0xffff;
  std::int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 a = forward16<A, false>(x, c, i, all);
    const __m512 b = forward16<A, false>(x, c, i + kLanes, all);
    store32(y + i, a, b, integer);
  }
  for (; i < n; i += kLanes) {
    const __mmask16 k = first_lanes(n - i);
    store16(y + i, forward16<A, true>(x, c, i, k), k, integer);
  }
}

template <Act A>
MIXPREC_BN_TARGET void backward_dx(const bfloat16* dy, const bfloat16* x, std::int64_t n,
                                   const Coefficients& c, bfloat16* dx) {
  const bool integer = denormals_are_zero();
  constexpr __mmask16 all = 0xffff;
  std::int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m512 a = backward_dx16<A, false>(dy, x, c, i, all);
    const __m512 b = backward_dx16<A, false>(dy, x, c, i + kLanes, all);
    store32(dx + i, a, b, integer);
  }
  for (; i < n; i += kLanes) {
    const __mmask16 k = first_lanes(n - i);
    store16(dx + i, backward_dx16<A, true>(dy, x, c, i, k), k, integer);
  }
}

template <Act A>
void install(Kernels<bfloat16>& k) {
  k.forward = forward<A>;
  k.backward_dx = backward_dx<A>;
}

#undef MIXPREC_BN_STEP
#undef MIXPREC_BN_TARGET

}  // namespace

bool use_native_bf16_stores(Act act, Kernels<bfloat16>& k) {
  if (core::convert_isa() < core::ConvertIsa::avx512_bf16) return false;
  switch (act) {
    case Act::none: install<Act::none>(k); return true;
    case Act::relu: install<Act::relu>(k); return true;
    case Act::relu6: install<Act::relu6>(k); return true;
    case Act::sigmoid:
    case Act::silu: break;
  }
  return false;
}

#else

bool use_native_bf16_stores(Act, Kernels<bfloat16>&) { return false; }

#endif

}  // namespace mixprec::cpu::bn_kernels
