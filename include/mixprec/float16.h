// IEEE binary16 host type: 2 bytes of storage with explicit conversion from/to float.
// Conversion is round to nearest, ties to even; overflow gives +-inf; NaN stays a quiet NaN with
// its payload's top bits (both directions quiet a signalling NaN); subnormals are exact. Bulk
// conversion (F16C when present) is in convert.h.
#pragma once

#include <bit>
#include <cstdint>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

namespace detail {

inline std::uint16_t float_to_half_bits(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // Inf or NaN; NaN keeps its top payload bits and is made quiet.
    return x > 0x7f800000u ? static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu))
                           : static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (x >= 0x477ff000u)
    return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5f aligns the value so the float adder's own
    // round-to-nearest-even rounds at the half subnormal ulp (2^-24). Needs no FTZ/DAZ.
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
  }
  const std::uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;  // rebias exponent by -112 and add the rounding bias (ties to even)
  return static_cast<std::uint16_t>(sign | (x >> 13));
}

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {
    // Inf, or NaN with its payload kept and made quiet: IEEE 754 convertFormat delivers a quiet NaN
    // for a signalling one, and F16C's vcvtph2ps does the same, so bulk and scalar paths agree.
    const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace detail

struct float16 {
  std::uint16_t bits = 0;

  float16() = default;
  explicit float16(float value) : bits(detail::float_to_half_bits(value)) {}
  explicit operator float() const { return detail::half_bits_to_float(bits); }

  static float16 from_bits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(float16) == 2);

}  // namespace mixprec

#pragma GCC visibility pop
