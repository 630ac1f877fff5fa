// The vectorised float32 loops of backend/cpu/vector_math.h: exp, log and the activations (forward
// and the fused backward g * op'(x)), one loop per op, compiled for several vector widths.
#include "backend/cpu/vector_math.h"

#include "backend/cpu/vector_math_gelu.h"

namespace mixprec::cpu {

namespace {

// Compiled for AVX-512, AVX2 and the baseline; the loader picks the widest the CPU runs (the
// library itself targets baseline x86-64, where these loops are only 4 lanes wide). File-local:
// GCC gives a target_clones function's dispatcher (an ifunc) default visibility whatever
// -fvisibility says, so an external one would be exported by libmixprec.so
// (scripts/check-exports.sh); the functions at the end are the plain, hidden entry points.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MIXPREC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MIXPREC_VECTOR_CLONES
#endif

MIXPREC_VECTOR_CLONES
void exp_floats_cloned(float* out, const float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = exp_float(x[i]);
}

MIXPREC_VECTOR_CLONES
void log_floats_cloned(float* out, const float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = log_float(x[i]);
}

// relu and relu6 keep NaN (every comparison with it is false, so x passes through).
MIXPREC_VECTOR_CLONES
bool activation_cloned(UnaryOp op, float* out, const float* x, std::int64_t n) {
  switch (op) {
    case UnaryOp::relu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f || x[i] != x[i] ? x[i] : 0.0f;
      return true;
    case UnaryOp::relu6:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) {
        out[i] = x[i] < 0.0f ? 0.0f : (x[i] > 6.0f ? 6.0f : x[i]);
      }
      return true;
    case UnaryOp::sigmoid:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = sigmoid_float(x[i]);
      return true;
    case UnaryOp::silu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * sigmoid_float(x[i]);
      return true;
    case UnaryOp::tanh:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = tanh_float(x[i]);
      return true;
    case UnaryOp::gelu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) {
        out[i] = x[i] * normal_cdf_float(x[i], half_square_exp(x[i]));
      }
      return true;
    case UnaryOp::gelu_tanh:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_float(x[i]);
      return true;
    default: return false;
  }
}

// The backward of tanh and the two GELUs. tanh's derivative comes from its output (1 - y)(1 + y)
// (exact factors for |y| >= 1/2) when y is float32; from x as 4 e / (1 + e)^2 when y was rounded to
// 16 bits (recompute), which stays accurate where tanh saturates.
MIXPREC_VECTOR_CLONES
bool tanh_gelu_backward_cloned(UnaryOp op, float* o, const float* g, const float* x, const float* y,
                               std::int64_t n, bool recompute) {
  switch (op) {
    case UnaryOp::tanh:
      if (recompute) {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * tanh_derivative_float(x[i]);
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * ((1.0f - y[i]) * (1.0f + y[i]));
      }
      return true;
    case UnaryOp::gelu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) {
        const float e = half_square_exp(x[i]);
        o[i] = g[i] * (normal_cdf_float(x[i], e) + x[i] * (e * kInvSqrt2PiF));
      }
      return true;
    case UnaryOp::gelu_tanh:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * gelu_tanh_derivative_float(x[i]);
      return true;
    default: return false;
  }
}

// The derivatives multiply g (so a NaN or infinite g still propagates where the derivative is 0,
// as the shared per-element body does).
MIXPREC_VECTOR_CLONES
bool activation_backward_cloned(UnaryOp op, float* o, const float* g, const float* x,
                                const float* y, std::int64_t n, bool recompute) {
  switch (op) {
    case UnaryOp::relu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * (x[i] > 0.0f ? 1.0f : 0.0f);
      return true;
    case UnaryOp::relu6:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) {
        o[i] = g[i] * ((x[i] > 0.0f && x[i] < 6.0f) ? 1.0f : 0.0f);
      }
      return true;
    case UnaryOp::sigmoid:
      if (recompute) {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
          const float s = sigmoid_float(x[i]);
          o[i] = g[i] * (s * (1.0f - s));
        }
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * (y[i] * (1.0f - y[i]));
      }
      return true;
    case UnaryOp::silu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) {
        const float s = sigmoid_float(x[i]);
        o[i] = g[i] * (s * (1.0f + x[i] * (1.0f - s)));
      }
      return true;
    case UnaryOp::exp:
      if (recompute) {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * exp_float(x[i]);
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) o[i] = g[i] * y[i];
      }
      return true;
    default: return tanh_gelu_backward_cloned(op, o, g, x, y, n, recompute);
  }
}

}  // namespace

void exp_floats(float* out, const float* x, std::int64_t n) { exp_floats_cloned(out, x, n); }

void log_floats(float* out, const float* x, std::int64_t n) { log_floats_cloned(out, x, n); }

bool activation_floats(UnaryOp op, float* out, const float* x, std::int64_t n) {
  return activation_cloned(op, out, x, n);
}

bool activation_backward_floats(UnaryOp op, float* o, const float* g, const float* x,
                                const float* y, std::int64_t n, bool recompute) {
  return activation_backward_cloned(op, o, g, x, y, n, recompute);
}

}  // namespace mixprec::cpu
