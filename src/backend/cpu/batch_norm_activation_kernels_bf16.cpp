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
// - the rounding to bfloat16 is bf16_native_rounding.h's: vcvtne2ps2bf16, or the integer formula
//   for a vector holding a float32 subnormal (which the instruction flushes) or under MXCSR.DAZ.
// Tails are masked loads and stores: nothing outside [0, n) is read or written.
#pragma GCC optimize("fp-contract=off")

#include "backend/cpu/batch_norm_activation_kernels_bf16.h"

#include <cstdint>

#include "core/bf16_native_rounding.h"

namespace mixprec::cpu::bn_kernels {

#if MIXPREC_BF16_NATIVE
namespace {

using core::bf16_native::denormals_are_zero;
using core::bf16_native::first_lanes;
using core::bf16_native::kLanes;
using core::bf16_native::load_bf16;
using core::bf16_native::store16;
using core::bf16_native::store32;

#define MIXPREC_BN_TARGET MIXPREC_BF16_NATIVE_TARGET
#define MIXPREC_BN_STEP MIXPREC_BF16_NATIVE_STEP

template <bool Masked>
MIXPREC_BN_STEP __m512 load_f32(const float* p, __mmask16 k) {
  if constexpr (Masked) {
    return _mm512_maskz_loadu_ps(k, p);
  } else {
    return _mm512_loadu_ps(p);
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
  if (!core::bf16_native::native_bf16_rounding()) return false;
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
