// Branch-free 16-bit <-> float32 conversions of one value, written as selects so that a loop
// over them under `#pragma omp simd` vectorises into register conversions (a 16-bit shift for
// bfloat16, integer and float arithmetic for float16) instead of a call to mixprec::convert per
// chunk and a round trip through a buffer. Bit-exact with the scalar conversions of
// mixprec/float16.h and mixprec/bfloat16.h: round to nearest even, overflow to inf, NaN kept
// (made quiet), float16 subnormals exact.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::cpu::simd {

inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(nan ? (x >> 16) | 0x0040u : rounded);
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t magnitude = h & 0x7fffu;
  // Normal halves: the exponent rebiased by 127 - 15 under the shifted mantissa.
  const std::uint32_t normal = (magnitude << 13) + 0x38000000u;
  // Subnormal halves: magnitude * 2^-24, exact, through an integer conversion (a float32
  // subnormal operand would take a slow microcode assist).
  const float subnormal = static_cast<float>(static_cast<std::int32_t>(magnitude)) * 0x1p-24f;
  // Inf and NaN (exponent 31): float32 exponent 255, the mantissa shifted up, NaN made quiet.
  const std::uint32_t special =
      0x7f800000u | ((magnitude & 0x3ffu) << 13) | (magnitude > 0x7c00u ? 0x00400000u : 0u);
  std::uint32_t bits = magnitude < 0x400u ? std::bit_cast<std::uint32_t>(subnormal) : normal;
  bits = magnitude >= 0x7c00u ? special : bits;
  return std::bit_cast<float>(sign | bits);
}

inline std::uint16_t float_to_half(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  // Normal range: rebias the exponent by -112, add the rounding bias (ties to even), drop 13 bits;
  // a carry into exponent 31 gives inf.
  const std::uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 rounds |value| to a multiple of 2^-24 (the half subnormal step, ties
  // to even in the float addition); the low bits of the sum are the subnormal mantissa.
  const float shifted = std::bit_cast<float>(a) + 0.5f;
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u;
  const std::uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  std::uint32_t r = a < 0x38800000u ? subnormal : normal;
  r = a >= 0x477ff000u ? 0x7c00u : r;  // >= 65520 (and inf) round to inf
  r = a > 0x7f800000u ? nan : r;
  return static_cast<std::uint16_t>(sign | r);
}

// Storage type T (float, float16, bfloat16) <-> float32 for one value.
template <typename T>
inline float load(const T* p) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return bf16_to_float(p->bits);
  } else if constexpr (std::is_same_v<T, float16>) {
    return half_to_float(p->bits);
  } else {
    return *p;
  }
}

template <typename T>
inline void store(T* p, float v) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    p->bits = float_to_bf16(v);
  } else if constexpr (std::is_same_v<T, float16>) {
    p->bits = float_to_half(v);
  } else {
    *p = v;
  }
}

}  // namespace mixprec::cpu::simd
