#include "backend/cpu/optimizer_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "core/dispatch.h"

namespace mixprec::cpu {

namespace {

// Written with value comparisons (not std::min/max, which return references) so that the loops
// if-convert to vector min/max; NaN fails both comparisons and passes through.
inline float transformed(float raw, GradientTransform t) {
  float g = raw * t.scale;
  g = g < -t.limit ? -t.limit : g;
  return g > t.limit ? t.limit : g;
}

// Elements per block of sum_of_squares: large enough to amortise the parallel loop, fixed so that
// the order of the additions (and the rounding) never depends on the thread count.
constexpr std::int64_t kNormBlock = 1 << 14;

}  // namespace

// The update loops run in float, the dtype of the variables and slots: per-step constants are
// computed in double by the caller and rounded once. `omp simd` asks for vector code without
// relaxing IEEE semantics; each element is independent. The Adam and RMSprop loops vectorise only
// when the library is built with -fno-math-errno (otherwise every sqrt carries a branch to libm
// for errno); they are single fused passes either way.

void sgd_update(float* var, const float* grad, float* momentum, std::int64_t n,
                GradientTransform transform, const SGDStep& step) {
  const float lr = step.learning_rate, mu = step.momentum;
  if (momentum == nullptr) {
#pragma omp parallel for simd if (parallel : n >= kParallelThreshold)
    for (std::int64_t i = 0; i < n; ++i) var[i] -= lr * transformed(grad[i], transform);
  } else if (!step.nesterov) {
#pragma omp parallel for simd if (parallel : n >= kParallelThreshold)
    for (std::int64_t i = 0; i < n; ++i) {
      const float m = mu * momentum[i] - lr * transformed(grad[i], transform);
      momentum[i] = m;
      var[i] += m;
    }
  } else {
#pragma omp parallel for simd if (parallel : n >= kParallelThreshold)
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = transformed(grad[i], transform);
      const float m = mu * momentum[i] - lr * g;
      momentum[i] = m;
      var[i] += mu * m - lr * g;
    }
  }
}

void adam_update(float* var, const float* grad, float* m, float* v, std::int64_t n,
                 GradientTransform transform, const AdamStep& step) {
  const float alpha = step.alpha, c1 = step.one_minus_beta_1, c2 = step.one_minus_beta_2;
  const float eps = step.epsilon, decay = step.decay;
#pragma omp parallel for simd if (parallel : n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = transformed(grad[i], transform);
    float w = var[i];
    w -= w * decay;  // AdamW's decoupled decay, before the Adam step (decay = 0 for Adam)
    const float mi = m[i] + (g - m[i]) * c1;
    const float vi = v[i] + (g * g - v[i]) * c2;
    m[i] = mi;
    v[i] = vi;
    var[i] = w - mi * alpha / (std::sqrt(vi) + eps);
  }
}

namespace {
// One loop per (centered, momentum) combination: a branch inside an `omp simd` loop is not
// unswitched and would keep it scalar.
template <bool kCentered, bool kMomentum>
void rmsprop_loop(float* var, const float* grad, float* velocity, float* momentum,
                  float* average_gradient, std::int64_t n, GradientTransform transform,
                  const RMSpropStep& step) {
  const float lr = step.learning_rate, rho = step.rho, one_minus_rho = 1.0f - step.rho;
  const float mu = step.momentum, eps = step.epsilon;
#pragma omp parallel for simd if (parallel : n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = transformed(grad[i], transform);
    const float vi = rho * velocity[i] + one_minus_rho * (g * g);
    velocity[i] = vi;
    float denominator = vi + eps;
    if constexpr (kCentered) {
      const float a = rho * average_gradient[i] + one_minus_rho * g;
      average_gradient[i] = a;
      denominator = vi - a * a + eps;
    }
    const float increment = lr * g / std::sqrt(denominator);
    if constexpr (kMomentum) {
      const float mom = mu * momentum[i] + increment;
      momentum[i] = mom;
      var[i] -= mom;
    } else {
      var[i] -= increment;
    }
  }
}
}  // namespace

void rmsprop_update(float* var, const float* grad, float* velocity, float* momentum,
                    float* average_gradient, std::int64_t n, GradientTransform transform,
                    const RMSpropStep& step) {
  const bool centered = average_gradient != nullptr, with_momentum = momentum != nullptr;
  if (centered && with_momentum) {
    rmsprop_loop<true, true>(var, grad, velocity, momentum, average_gradient, n, transform, step);
  } else if (centered) {
    rmsprop_loop<true, false>(var, grad, velocity, momentum, average_gradient, n, transform, step);
  } else if (with_momentum) {
    rmsprop_loop<false, true>(var, grad, velocity, momentum, average_gradient, n, transform, step);
  } else {
    rmsprop_loop<false, false>(var, grad, velocity, momentum, average_gradient, n, transform, step);
  }
}

double sum_of_squares(const float* x, std::int64_t n) {
  const std::int64_t blocks = (n + kNormBlock - 1) / kNormBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold && blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t start = b * kNormBlock, stop = std::min(n, start + kNormBlock);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = start; i < stop; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[static_cast<std::size_t>(b)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

namespace {
#if defined(__x86_64__) && defined(__GNUC__)
// float32 -> float32 unscaling of a block with AVX2: the same arithmetic as the generic loop
// (float(double(g) * inverse)), with streaming stores. The unscaled gradients are read again only
// by the optimizer update, after every layer's gradient has been unscaled (tens of MB later), so
// writing around the cache saves reading each destination line first: a third of the traffic.
// Returns whether a non-finite value was seen. `out` must be 32-byte aligned.
__attribute__((target("avx2"))) bool unscale_block_avx2(const float* in, float* out, std::int64_t n,
                                                        double inverse) {
  const __m256d k = _mm256_set1_pd(inverse);
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(in + i);
    const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(g)), k));
    const __m128 hi =
        _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(g, 1)), k));
    const __m256 v = _mm256_set_m128(hi, lo);
    _mm256_stream_ps(out + i, v);
    const __m256i e = _mm256_and_si256(_mm256_castps_si256(v), exponent);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exponent));
  }
  bool non_finite = !_mm256_testz_si256(bad, bad);
  for (; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<double>(in[i]) * inverse);
    non_finite = non_finite || !std::isfinite(out[i]);
  }
  _mm_sfence();
  return non_finite;
}

bool has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif
}  // namespace

bool unscale_and_check(const Tensor& grad, double scale, Tensor& out) {
  const Tensor src = grad.detach().contiguous();
  const std::int64_t n = src.numel();
  float* o = out.data<float>();
  const double inverse = 1.0 / scale;
  bool non_finite = false;
#if defined(__x86_64__) && defined(__GNUC__)
  if (src.dtype() == DType::float32 && has_avx2() &&
      reinterpret_cast<std::uintptr_t>(o) % 32 == 0) {
    const float* in = src.data<float>();
    constexpr std::int64_t kBlock = 1 << 14;  // a multiple of 8: every block stays 32-byte aligned
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) reduction(|| : non_finite) if (n >= kParallelThreshold)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t start = b * kBlock;
      non_finite =
          unscale_block_avx2(in + start, o + start, std::min(kBlock, n - start), inverse) ||
          non_finite;
    }
    return !non_finite;
  }
#endif
  core::dispatch_floating(src.dtype(), "unscale_and_check", [&]<typename T>() {
    using C = core::compute_t<T>;
    const T* in = static_cast<const T*>(src.data_ptr());
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) reduction(|| : non_finite) if (n >= kParallelThreshold)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t start = c * kChunk, m = std::min(kChunk, n - start);
      alignas(64) C buffer[kChunk];
      gather(in + start, 1, m, buffer);  // 16-bit values widen to float here (F16C when present)
      float* dst = o + start;
      // Non-finite test on the bits (exponent all ones): integer code that vectorises together
      // with the scaling (checked with -fopt-info-vec), whatever the floating-point flags.
      std::uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
      for (std::int64_t i = 0; i < m; ++i) {
        const float value = static_cast<float>(static_cast<double>(buffer[i]) * inverse);
        dst[i] = value;
        std::uint32_t bits;
        std::memcpy(&bits, &value, sizeof bits);
        bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
      }
      non_finite = non_finite || bad != 0;
    }
  });
  return !non_finite;
}

}  // namespace mixprec::cpu
