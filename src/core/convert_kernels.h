// The two implementations behind mixprec::convert (include/mixprec/convert.h), exposed so tests
// and benchmarks can run each one directly. Both are bit-exact with the scalar conversions of
// float16.h / bfloat16.h for every input; mixprec::convert picks the SIMD one when the CPU has it.
#pragma once

#include <cstddef>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::core {

// True when the CPU (and OS) support AVX2 and F16C; always false off x86. Computed once.
bool cpu_has_f16c_avx2();

// Element-by-element loops over the scalar conversions; run on every CPU.
void convert_portable(const float* src, float16* dst, std::size_t n);
void convert_portable(const float16* src, float* dst, std::size_t n);
void convert_portable(const float* src, bfloat16* dst, std::size_t n);
void convert_portable(const bfloat16* src, float* dst, std::size_t n);

// F16C/AVX2 kernels (tails go through the portable loop). Throw mixprec::Error when
// cpu_has_f16c_avx2() is false.
void convert_simd(const float* src, float16* dst, std::size_t n);
void convert_simd(const float16* src, float* dst, std::size_t n);
void convert_simd(const float* src, bfloat16* dst, std::size_t n);
void convert_simd(const bfloat16* src, float* dst, std::size_t n);

}  // namespace mixprec::core
