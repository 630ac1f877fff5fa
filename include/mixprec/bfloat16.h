// bfloat16 host type: the top 16 bits of an IEEE float32, with explicit conversion from/to float.
// float -> bfloat16 rounds to nearest, ties to even; overflow gives +-inf; NaN stays a quiet NaN.
#pragma once

#include <bit>
#include <cstdint>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

namespace detail {

inline std::uint16_t float_to_bfloat16_bits(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);  // ties to even; a carry into the exponent rounds up to inf
  return static_cast<std::uint16_t>(x >> 16);
}

inline float bfloat16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float value) : bits(detail::float_to_bfloat16_bits(value)) {}
  explicit operator float() const { return detail::bfloat16_bits_to_float(bits); }

  static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(bfloat16) == 2);

}  // namespace mixprec

#pragma GCC visibility pop
