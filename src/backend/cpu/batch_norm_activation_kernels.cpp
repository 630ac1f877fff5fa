// The register-resident batch-norm loops of batch_norm_activation_kernels.h: one templated body
// per loop, instantiated per storage type and activation, each compiled twice: with
// target_clones (AVX-512, AVX2, baseline; the loader picks) and as a plain baseline copy.
// Floating-point contraction is off in this file, so every copy rounds every operation the same
// way and the clones give bit-identical results (an AVX-512 clone would otherwise fuse
// multiply-adds that the baseline cannot).
#pragma GCC optimize("fp-contract=off")

#include "backend/cpu/batch_norm_activation_kernels.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <type_traits>

#include "backend/cpu/batch_norm_activation_kernels_bf16.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "backend/cpu/vector_math.h"

namespace mixprec::cpu::bn_kernels {

namespace {

// The wide copy is target_clones.h's (AVX-512 x86-64-v4 / AVX2 / baseline); with contraction off
// (above) its AVX2 clone rounds as the others do.
#define MIXPREC_BN_CLONES MIXPREC_CPU_CLONES
#define MIXPREC_BN_BASE MIXPREC_CPU_FLATTEN
#define MIXPREC_BN_INLINE MIXPREC_CPU_ALWAYS_INLINE

// relu and relu6 keep NaN (every comparison with it is false).
template <Act A>
MIXPREC_BN_INLINE float activate(float v) {
  if constexpr (A == Act::relu) return v > 0.0f || v != v ? v : 0.0f;
  if constexpr (A == Act::relu6) return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
  if constexpr (A == Act::sigmoid) return sigmoid_float(v);
  if constexpr (A == Act::silu) return v * sigmoid_float(v);
  return v;
}

// g * act'(v), multiplying g so that a NaN or infinite g propagates where the derivative is 0.
template <Act A>
MIXPREC_BN_INLINE float derivative(float v, float g) {
  if constexpr (A == Act::relu) return g * (v > 0.0f ? 1.0f : 0.0f);
  if constexpr (A == Act::relu6) return g * ((v > 0.0f && v < 6.0f) ? 1.0f : 0.0f);
  if constexpr (A == Act::sigmoid) {
    const float s = sigmoid_float(v);
    return g * (s * (1.0f - s));
  }
  if constexpr (A == Act::silu) {
    const float s = sigmoid_float(v);
    return g * (s * (1.0f + v * (1.0f - s)));
  }
  return g;
}

template <typename T>
MIXPREC_BN_INLINE void sum_body(const T* x, std::int64_t n, float* acc) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) acc[i] += simd::load(x + i);
}

template <typename T>
MIXPREC_BN_INLINE void centered_body(const T* x, std::int64_t n, const float* mean, float* acc1,
                                     float* acc2) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = simd::load(x + i) - mean[i];
    acc1[i] += d;
    acc2[i] += d * d;
  }
}

template <typename T, Act A>
MIXPREC_BN_INLINE void forward_body(const T* x, std::int64_t n, const Coefficients& c, T* y) {
  const float* m = c.mean;
  const float* s = c.scale;
  const float* b = c.shift;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    simd::store(y + i, activate<A>((simd::load(x + i) - m[i]) * s[i] + b[i]));
  }
}

template <typename T, Act A>
MIXPREC_BN_INLINE void backward_sums_body(const T* dy, const T* x, std::int64_t n,
                                          const Coefficients& c, float* acc_g, float* acc_gx) {
  const float* m = c.mean;
  const float* s = c.scale;
  const float* b = c.shift;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = simd::load(x + i) - m[i];
    const float dz = derivative<A>(d * s[i] + b[i], simd::load(dy + i));
    acc_g[i] += dz;
    acc_gx[i] += dz * d;
  }
}

template <typename T, Act A>
MIXPREC_BN_INLINE void backward_dx_body(const T* dy, const T* x, std::int64_t n,
                                        const Coefficients& c, T* dx) {
  const float* m = c.mean;
  const float* s = c.scale;
  const float* b = c.shift;
  const float* k = c.k;
  const float* p = c.p;
  const float* q = c.q;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = simd::load(x + i) - m[i];
    const float dz = derivative<A>(d * s[i] + b[i], simd::load(dy + i));
    simd::store(dx + i, k[i] * (dz - p[i] - d * q[i]));
  }
}

// The two compiled copies of each loop: Wide (target_clones) and Base (baseline only).
struct Wide {};
struct Base {};

#define MIXPREC_BN_COPIES(ATTR, TAG)                                                              \
  template <typename T>                                                                           \
  ATTR void sum_fn(TAG, const T* x, std::int64_t n, float* acc) {                                 \
    sum_body(x, n, acc);                                                                          \
  }                                                                                               \
  template <typename T>                                                                           \
  ATTR void centered_fn(TAG, const T* x, std::int64_t n, const float* m, float* a1, float* a2) {  \
    centered_body(x, n, m, a1, a2);                                                               \
  }                                                                                               \
  template <typename T, Act A>                                                                    \
  ATTR void forward_fn(TAG, const T* x, std::int64_t n, const Coefficients& c, T* y) {            \
    forward_body<T, A>(x, n, c, y);                                                               \
  }                                                                                               \
  template <typename T, Act A>                                                                    \
  ATTR void backward_sums_fn(TAG, const T* dy, const T* x, std::int64_t n, const Coefficients& c, \
                             float* ag, float* agx) {                                             \
    backward_sums_body<T, A>(dy, x, n, c, ag, agx);                                               \
  }                                                                                               \
  template <typename T, Act A>                                                                    \
  ATTR void backward_dx_fn(TAG, const T* dy, const T* x, std::int64_t n, const Coefficients& c,   \
                           T* dx) {                                                               \
    backward_dx_body<T, A>(dy, x, n, c, dx);                                                      \
  }

MIXPREC_BN_COPIES(MIXPREC_BN_CLONES, Wide)
MIXPREC_BN_COPIES(MIXPREC_BN_BASE, Base)

// Plain function pointers to one copy (the tag argument bound).
template <typename Tag, typename T, Act A>
Kernels<T> table() {
  Kernels<T> k;
  k.sum = [](const T* x, std::int64_t n, float* acc) { sum_fn<T>(Tag{}, x, n, acc); };
  k.centered = [](const T* x, std::int64_t n, const float* m, float* a1, float* a2) {
    centered_fn<T>(Tag{}, x, n, m, a1, a2);
  };
  k.forward = [](const T* x, std::int64_t n, const Coefficients& c, T* y) {
    forward_fn<T, A>(Tag{}, x, n, c, y);
  };
  k.backward_sums = [](const T* dy, const T* x, std::int64_t n, const Coefficients& c, float* ag,
                       float* agx) { backward_sums_fn<T, A>(Tag{}, dy, x, n, c, ag, agx); };
  k.backward_dx = [](const T* dy, const T* x, std::int64_t n, const Coefficients& c, T* dx) {
    backward_dx_fn<T, A>(Tag{}, dy, x, n, c, dx);
  };
  return k;
}

template <typename Tag, typename T>
Kernels<T> table_for(Act act) {
  switch (act) {
    case Act::relu: return table<Tag, T, Act::relu>();
    case Act::relu6: return table<Tag, T, Act::relu6>();
    case Act::sigmoid: return table<Tag, T, Act::sigmoid>();
    case Act::silu: return table<Tag, T, Act::silu>();
    case Act::none: break;
  }
  return table<Tag, T, Act::none>();
}

std::atomic<bool> g_baseline{false};

// About this many elements per period when C is small (2 KiB of float32 per parameter).
constexpr std::int64_t kPeriodTarget = 512;
constexpr std::int64_t kLanes = 16;

}  // namespace

std::optional<Act> act_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::relu: return Act::relu;
    case UnaryOp::relu6: return Act::relu6;
    case UnaryOp::sigmoid: return Act::sigmoid;
    case UnaryOp::silu: return Act::silu;
    default: return std::nullopt;
  }
}

Period period_of(std::int64_t c) {
  c = std::max<std::int64_t>(c, 1);
  // The fewest rows whose elements are a multiple of the vector width, then as many of those
  // as fit in the target.
  const std::int64_t unit = kLanes / std::gcd(c, kLanes);
  const std::int64_t units = std::max<std::int64_t>(1, kPeriodTarget / (unit * c));
  Period p;
  p.rows = unit * units;
  p.elements = p.rows * c;
  return p;
}

void repeat_into(const float* v, std::int64_t c, Period p, float* out) {
  for (std::int64_t r = 0; r < p.rows; ++r) std::copy_n(v, c, out + r * c);
}

std::vector<float> repeat(const float* v, std::int64_t c, Period p) {
  std::vector<float> out(static_cast<std::size_t>(p.elements));
  repeat_into(v, c, p, out.data());
  return out;
}

void fold(const float* partial, std::int64_t c, Period p, double* out) {
  for (std::int64_t r = 0; r < p.rows; ++r) {
    for (std::int64_t j = 0; j < c; ++j) out[j] += partial[r * c + j];
  }
}

template <typename T>
Kernels<T> kernels(Act act) {
  if (g_baseline.load()) return table_for<Base, T>(act);
  Kernels<T> k = table_for<Wide, T>(act);
  // On a CPU with AVX512_BF16 the bfloat16 stores round natively (bit-identical, faster).
  if constexpr (std::is_same_v<T, bfloat16>) use_native_bf16_stores(act, k);
  return k;
}

template Kernels<float> kernels<float>(Act);
template Kernels<float16> kernels<float16>(Act);
template Kernels<bfloat16> kernels<bfloat16>(Act);

void force_baseline(bool baseline) { g_baseline.store(baseline); }

}  // namespace mixprec::cpu::bn_kernels
