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

// Elements per block of sum_of_squares: large enough to amortise the parallel loop, fixed so that
// the order of the additions (and the rounding) never depends on the thread count.
constexpr std::int64_t kNormBlock = 1 << 14;

// The update loop of kind K: the shared element body in an `omp simd` loop. The constants are
// copied into each thread (firstprivate): a shared struct would be read through a pointer that
// stores to var and the slots may alias, and the loop would re-load and re-broadcast every
// constant per iteration (about 10% slower Adam); private copies stay in vector registers. The Adam
// and RMSprop loops vectorise only when the library is built with -fno-math-errno (otherwise every
// sqrt carries a branch to libm for errno); they are single fused passes either way.
template <kernel_math::UpdateKind K>
void update_loop(const kernel_math::UpdateConstants& constants, float* var, const float* grad,
                 float* s0, float* s1, float* s2, std::int64_t n, float clip_scale) {
  constexpr int kSlots = kernel_math::update_slot_count(K);
  const kernel_math::UpdateConstants c = constants;
#pragma omp parallel for simd firstprivate(c) if (parallel : n >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    kernel_math::update_element<K>(c, grad[i], var + i, kSlots > 0 ? s0 + i : nullptr,
                                   kSlots > 1 ? s1 + i : nullptr, kSlots > 2 ? s2 + i : nullptr,
                                   clip_scale);
  }
}

}  // namespace

void update(const kernel_math::UpdateRule& rule, float* var, const float* grad,
            float* const (&slots)[kernel_math::kMaxUpdateSlots], std::int64_t n, float clip_scale) {
  kernel_math::dispatch_update_kind(rule.kind, [&]<kernel_math::UpdateKind K>() {
    update_loop<K>(rule.constants, var, grad, slots[0], slots[1], slots[2], n, clip_scale);
  });
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
    out[i] = kernel_math::unscale_element(in[i], inverse);
    non_finite = non_finite || kernel_math::non_finite(out[i]);
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

enum class Output { write, none };

// Whether some element of src (contiguous, floating) times `inverse`, as float32, is Inf or NaN;
// with Output::write the products are stored in out as well. The portable path of
// unscale_and_check and the whole of check_finite.
template <Output kOutput>
bool unscaled_non_finite(const Tensor& src, double inverse, float* out, const char* op) {
  const std::int64_t n = src.numel();
  bool non_finite = false;
  core::dispatch_floating(src.dtype(), op, [&]<typename T>() {
    using C = core::compute_t<T>;
    const T* in = static_cast<const T*>(src.data_ptr());
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) reduction(|| : non_finite) if (n >= kParallelThreshold)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t start = c * kChunk, m = std::min(kChunk, n - start);
      alignas(64) C buffer[kChunk];
      gather(in + start, 1, m, buffer);  // 16-bit values widen to float here (F16C when present)
      // Non-finite test on the bits (exponent all ones): integer code that vectorises together
      // with the scaling (checked with -fopt-info-vec), whatever the floating-point flags.
      std::uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
      for (std::int64_t i = 0; i < m; ++i) {
        const float value = kernel_math::unscale_element(static_cast<double>(buffer[i]), inverse);
        if constexpr (kOutput == Output::write) out[start + i] = value;
        bad |=
            static_cast<std::uint32_t>(kernel_math::non_finite_bits(kernel_math::bits_of(value)));
      }
      non_finite = non_finite || bad != 0;
    }
  });
  return non_finite;
}

}  // namespace

bool unscale_and_check(const Tensor& grad, double scale, Tensor& out) {
  const Tensor src = grad.detach().contiguous();
  float* o = out.data<float>();
  const double inverse = 1.0 / scale;
#if defined(__x86_64__) && defined(__GNUC__)
  if (src.dtype() == DType::float32 && has_avx2() &&
      reinterpret_cast<std::uintptr_t>(o) % 32 == 0) {
    const std::int64_t n = src.numel();
    bool non_finite = false;
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
  return !unscaled_non_finite<Output::write>(src, inverse, o, "unscale_and_check");
}

bool finite_as_float32(const Tensor& grad) {
  const Tensor src = grad.detach().contiguous();
  return !unscaled_non_finite<Output::none>(src, 1.0, nullptr, "check_finite");
}

}  // namespace mixprec::cpu
