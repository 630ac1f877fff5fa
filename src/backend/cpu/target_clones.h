// The one definition of how the CPU's hot loops are compiled for several instruction sets: GCC
// target_clones for AVX-512 (x86-64-v4: F/BW/DQ/VL; without BW/VL GCC narrows 32 -> 16 bits with
// AVX2 pack/permute/blend sequences, bfloat16 stores ~4x slower than with vpmovdw and mask
// registers), AVX2 (x86-64-v3, with FMA) and the baseline; the loader picks the widest the CPU
// runs. flatten inlines the per-element helpers (simd_convert.h, vector_math.h), which GCC may
// otherwise leave out of line, turning a vector loop into scalar calls. Use it on functions with
// internal linkage (an anonymous namespace), so the ifunc dispatchers are not exported. Other
// compilers and targets get one plain copy.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MIXPREC_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#define MIXPREC_CPU_FLATTEN __attribute__((flatten))
#define MIXPREC_CPU_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MIXPREC_CPU_CLONES
#define MIXPREC_CPU_FLATTEN
#define MIXPREC_CPU_ALWAYS_INLINE inline
#endif
