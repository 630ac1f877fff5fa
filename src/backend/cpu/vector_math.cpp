#include "backend/cpu/vector_math.h"

namespace mixprec::cpu {

namespace {

// Compiled for AVX-512, AVX2 and the baseline; the loader picks the widest the CPU runs (the
// library itself targets baseline x86-64, where this loop is only 4 lanes wide). File-local: GCC
// gives a target_clones function's dispatcher (an ifunc) default visibility whatever
// -fvisibility says, so an external one would be exported by libmixprec.so
// (scripts/check-exports.sh); exp_floats below is the plain, hidden entry point.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void exp_floats_cloned(float* out, const float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = exp_float(x[i]);
}

}  // namespace

void exp_floats(float* out, const float* x, std::int64_t n) { exp_floats_cloned(out, x, n); }

}  // namespace mixprec::cpu
