// The implementations behind mixprec::convert (include/mixprec/convert.h), exposed so tests and
// benchmarks can run each one: a portable loop, F16C/AVX2 kernels and AVX-512 kernels (the last in
// convert_avx512.cpp). All are bit-exact with the scalar conversions of float16.h / bfloat16.h for
// every input; mixprec::convert picks the newest one the CPU has, up to a limit tests can lower.
#pragma once

#include <cstddef>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::core {

// The instruction sets of the bulk conversion paths, oldest first.
enum class ConvertIsa {
  portable,     // scalar loop, every CPU
  avx2_f16c,    // AVX2 + F16C
  avx512,       // AVX512F + AVX512BW + AVX512VL (float32 -> bfloat16 by integer arithmetic)
  avx512_bf16,  // the above + AVX512_BF16 and AVX512DQ (vcvtne2ps2bf16 for float32 -> bfloat16)
};

const char* to_string(ConvertIsa isa);

// True when the CPU (and OS) support AVX2 and F16C; always false off x86. Computed once.
bool cpu_has_f16c_avx2();

// The newest path this CPU (and OS) supports; computed once.
ConvertIsa convert_isa_supported();

// The path mixprec::convert and round_to_float16/bfloat16 use now: the newest supported one, or
// older if set_convert_isa_limit lowered it.
ConvertIsa convert_isa();

// For tests and benchmarks: use no path newer than `limit` (min(limit, convert_isa_supported())),
// so each older path can be run on a CPU that has a newer one. Returns the path in use before the
// call; pass it back to restore. Process-wide; not meant to be changed while conversions run.
ConvertIsa set_convert_isa_limit(ConvertIsa limit);

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

// AVX-512 kernels (convert_avx512.cpp; x86 only). Call them only when convert_isa_supported() is at
// least avx512 (f32_to_bf16_native: avx512_bf16); they do not check.
namespace avx512 {
void f32_to_f16(const float* src, float16* dst, std::size_t n);
void f16_to_f32(const float16* src, float* dst, std::size_t n);
void f32_to_bf16(const float* src, bfloat16* dst, std::size_t n);
void f32_to_bf16_native(const float* src, bfloat16* dst, std::size_t n);
void bf16_to_f32(const bfloat16* src, float* dst, std::size_t n);
void round_f16(const float* src, float* dst, std::size_t n);
void round_bf16(const float* src, float* dst, std::size_t n);
}  // namespace avx512

}  // namespace mixprec::core
