// Reference float32 <-> float16/bfloat16 conversions for the conversion tests, written with double
// arithmetic (find the two neighbouring representable values, pick the nearest, ties to even)
// instead of the bit tricks under test, plus small bit-pattern helpers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>

namespace mixprec::convert_reference {

using std::uint16_t;
using std::uint32_t;

inline float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
inline uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }

inline std::string hex(uint32_t v, int width) {
  std::ostringstream s;
  s << "0x" << std::hex << std::setw(width) << std::setfill('0') << v;
  return s.str();
}

// Rounds |a| (finite, > 0, with at most 24 significant bits, so every step below is exact in
// double) to a binary format with `fraction_bits` stored fraction bits and minimum normal exponent
// `min_exp`. Returns the integer significand `m` of the result on the grid 2^(e - fraction_bits),
// and updates e. Below 2^min_exp the grid stays 2^(min_exp - fraction_bits) (subnormals).
inline long long round_to_grid(double a, int fraction_bits, int min_exp, int& e) {
  int frexp_exp = 0;
  std::frexp(a, &frexp_exp);
  e = frexp_exp - 1;  // a in [2^e, 2^(e+1))
  const int grid_exp = std::max(e, min_exp) - fraction_bits;
  const double q = std::ldexp(a, -grid_exp);  // exact: scaling by a power of two
  double m = std::floor(q);
  const double rem = q - m;                                             // exact
  if (rem > 0.5 || (rem == 0.5 && std::fmod(m, 2.0) != 0.0)) m += 1.0;  // nearest, ties to even
  return static_cast<long long>(m);
}

// Reference float32 -> binary16.
inline uint16_t ref_float_to_half(float f) {
  const uint32_t x = to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7c00u);
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  int e = 0;
  long long m = round_to_grid(a, 10, -14, e);
  if (e < -14) return static_cast<uint16_t>(sign | m);  // m <= 1024; 1024 encodes 2^-14 (0x0400)
  if (m == 2048) {                                      // rounded up to the next binade
    m = 1024;
    ++e;
  }
  if (e > 15) return static_cast<uint16_t>(sign | 0x7c00u);  // beyond 65504 after rounding: inf
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | (m - 1024));
}

// Reference binary16 -> float32, by sign/exponent/mantissa arithmetic.
inline uint32_t ref_half_to_float_bits(uint16_t h) {
  const bool negative = (h & 0x8000u) != 0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude = 0.0;
  if (exponent == 0x1f) {
    if (mantissa != 0) {  // NaN: payload in the top fraction bits, quiet bit on
      return (negative ? 0x80000000u : 0u) | 0x7fc00000u | (static_cast<uint32_t>(mantissa) << 13);
    }
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
  }
  return to_bits(static_cast<float>(negative ? -magnitude : magnitude));
}

// Reference float32 -> bfloat16 (8 significant bits, float32's exponent range).
inline uint16_t ref_float_to_bf16(float f) {
  const uint32_t x = to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7f80u);
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  int e = 0;
  long long m = round_to_grid(a, 7, -126, e);
  if (e < -126) return static_cast<uint16_t>(sign | m);  // m <= 128; 128 encodes 2^-126 (0x0080)
  if (m == 256) {
    m = 128;
    ++e;
  }
  if (e > 127) return static_cast<uint16_t>(sign | 0x7f80u);
  return static_cast<uint16_t>(sign | ((e + 127) << 7) | (m - 128));
}

// Reference bfloat16 -> float32 value; NaNs widen bit-exactly.
inline uint32_t ref_bf16_to_float_bits(uint16_t b) {
  const bool negative = (b & 0x8000u) != 0;
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  double magnitude = 0.0;
  if (exponent == 0xff) {
    if (mantissa != 0) return static_cast<uint32_t>(b) << 16;
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -133);
  } else {
    magnitude = std::ldexp(static_cast<double>(128 + mantissa), exponent - 134);
  }
  return to_bits(static_cast<float>(negative ? -magnitude : magnitude));
}

}  // namespace mixprec::convert_reference
