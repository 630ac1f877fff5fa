// Bulk conversion between float32 and the 16-bit float types. Bit-exact with the scalar
// conversions of float16.h / bfloat16.h (round to nearest even, overflow to inf, NaN kept quiet,
// float16 subnormals exact); uses AVX-512 (with AVX512_BF16 for float32 -> bfloat16) or F16C/AVX2
// when the CPU has them, a portable loop otherwise.
#pragma once

#include <cstddef>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

void convert(const float* src, float16* dst, std::size_t n);
void convert(const float16* src, float* dst, std::size_t n);
void convert(const float* src, bfloat16* dst, std::size_t n);
void convert(const bfloat16* src, float* dst, std::size_t n);

// dst[i] = float(float16(src[i])) (resp. bfloat16): float32 values rounded to the 16-bit format
// (nearest even, overflow to inf, subnormals as the format has them) but kept in float32, in one
// pass instead of a conversion there and back. src == dst is allowed.
void round_to_float16(const float* src, float* dst, std::size_t n);
void round_to_bfloat16(const float* src, float* dst, std::size_t n);

}  // namespace mixprec

#pragma GCC visibility pop
