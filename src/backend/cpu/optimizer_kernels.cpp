#include "backend/cpu/optimizer_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/dispatch.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Elements per block of every multi-tensor loop: large enough to amortise the scheduling, a
// multiple of 16 so that blocks keep the vector alignment of their tensor, and fixed so that the
// order of the additions of sum_of_squares (and its rounding) never depends on the thread count.
constexpr std::int64_t kBlock = 1 << 14;

// A block of item `item` (an index into the caller's list): elements [start, start + n).
struct Block {
  std::size_t item;
  std::int64_t start, n;
};

// The blocks of items of the given sizes, item by item, and the total element count.
template <typename SizeOf>
std::vector<Block> split_blocks(std::size_t items, SizeOf size_of, std::int64_t& total) {
  std::vector<Block> blocks;
  total = 0;
  for (std::size_t i = 0; i < items; ++i) {
    const std::int64_t n = size_of(i);
    for (std::int64_t start = 0; start < n; start += kBlock) {
      blocks.push_back({i, start, std::min(kBlock, n - start)});
    }
    total += n;
  }
  return blocks;
}

// The update loop of kind K over one block: the shared element body in an `omp simd` loop. The
// constants are a private copy: a shared struct would be read through a pointer that stores to var
// and the slots may alias, and the loop would re-load and re-broadcast every constant per
// iteration (about 10% slower Adam); a local copy stays in vector registers. The Adam and RMSprop
// loops vectorise only when the library is built with -fno-math-errno (otherwise every sqrt
// carries a branch to libm for errno); they are single fused passes either way.
template <kernel_math::UpdateKind K>
void update_block(const kernel_math::UpdateConstants& constants, const UpdateArrays& a,
                  std::int64_t start, std::int64_t n) {
  constexpr int kSlots = kernel_math::update_slot_count(K);
  const kernel_math::UpdateConstants c = constants;
  float* var = a.variable + start;
  const float* grad = a.gradient + start;
  float* s0 = kSlots > 0 ? a.slots[0] + start : nullptr;
  float* s1 = kSlots > 1 ? a.slots[1] + start : nullptr;
  float* s2 = kSlots > 2 ? a.slots[2] + start : nullptr;
  const float clip_scale = a.clip_scale;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    kernel_math::update_element<K>(c, grad[i], var + i, kSlots > 0 ? s0 + i : nullptr,
                                   kSlots > 1 ? s1 + i : nullptr, kSlots > 2 ? s2 + i : nullptr,
                                   clip_scale);
  }
}

}  // namespace

void update_all(const kernel_math::UpdateRule& rule, std::span<const UpdateArrays> variables) {
  std::int64_t total = 0;
  const std::vector<Block> blocks = split_blocks(
      variables.size(), [&](std::size_t i) { return variables[i].n; }, total);
  kernel_math::dispatch_update_kind(rule.kind, [&]<kernel_math::UpdateKind K>() {
    // Balanced: the blocks of small tensors come first, so a static split gave the first thread
    // fewer elements than the second (EfficientNet-B0: 539 against 1288 samples of this loop).
    parallel_for_balanced(
        static_cast<std::int64_t>(blocks.size()), total >= kParallelThreshold, [&](std::int64_t b) {
          const Block& block = blocks[static_cast<std::size_t>(b)];
          update_block<K>(rule.constants, variables[block.item], block.start, block.n);
        });
  });
}

void update(const kernel_math::UpdateRule& rule, float* var, const float* grad,
            float* const (&slots)[kernel_math::kMaxUpdateSlots], std::int64_t n, float clip_scale) {
  const UpdateArrays one{var, grad, {slots[0], slots[1], slots[2]}, n, clip_scale};
  update_all(rule, std::span<const UpdateArrays>(&one, 1));
}

std::vector<double> sums_of_squares(std::span<const std::pair<const float*, std::int64_t>> arrays) {
  std::int64_t total = 0;
  const std::vector<Block> blocks = split_blocks(
      arrays.size(), [&](std::size_t i) { return arrays[i].second; }, total);
  std::vector<double> partial(blocks.size());
  parallel_for(static_cast<std::int64_t>(blocks.size()), total >= kParallelThreshold,
               [&](std::int64_t b) {
                 const Block& block = blocks[static_cast<std::size_t>(b)];
                 const float* x = arrays[block.item].first + block.start;
                 double s = 0.0;
#pragma omp simd reduction(+ : s)
                 for (std::int64_t i = 0; i < block.n; ++i) s += static_cast<double>(x[i]) * x[i];
                 partial[static_cast<std::size_t>(b)] = s;
               });
  // Each array's blocks are consecutive and in order: summed in that order, as one array alone.
  std::vector<double> sums(arrays.size(), 0.0);
  for (std::size_t b = 0; b < blocks.size(); ++b) sums[blocks[b].item] += partial[b];
  return sums;
}

double sum_of_squares(const float* x, std::int64_t n) {
  const std::pair<const float*, std::int64_t> one{x, n};
  return sums_of_squares(std::span(&one, 1))[0];
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

// Whether some element of src[start, start + n) (contiguous, floating) times `inverse`, as
// float32, is Inf or NaN; when `out` is not null the products are stored in out[start, ...) as
// well. The portable path of unscale_and_check and the whole of check_finite.
bool unscaled_non_finite(const Tensor& src, std::int64_t start, std::int64_t n, double inverse,
                         float* out) {
  bool non_finite = false;
  core::dispatch_floating(src.dtype(), "unscale_and_check", [&]<typename T>() {
    using C = core::compute_t<T>;
    const T* in = static_cast<const T*>(src.data_ptr()) + start;
    for (std::int64_t first = 0; first < n; first += kChunk) {
      const std::int64_t m = std::min(kChunk, n - first);
      alignas(64) C buffer[kChunk];
      gather(in + first, 1, m, buffer);  // 16-bit values widen to float here (F16C when present)
      // Non-finite test on the bits (exponent all ones): integer code that vectorises together
      // with the scaling (checked with -fopt-info-vec), whatever the floating-point flags.
      std::uint32_t bad = 0;
      if (out != nullptr) {
        float* o = out + start + first;
#pragma omp simd reduction(| : bad)
        for (std::int64_t i = 0; i < m; ++i) {
          o[i] = kernel_math::unscale_element(static_cast<double>(buffer[i]), inverse);
          bad |=
              static_cast<std::uint32_t>(kernel_math::non_finite_bits(kernel_math::bits_of(o[i])));
        }
      } else {
#pragma omp simd reduction(| : bad)
        for (std::int64_t i = 0; i < m; ++i) {
          const float value = kernel_math::unscale_element(static_cast<double>(buffer[i]), inverse);
          bad |=
              static_cast<std::uint32_t>(kernel_math::non_finite_bits(kernel_math::bits_of(value)));
        }
      }
      non_finite = non_finite || bad != 0;
    }
  });
  return non_finite;
}

// One block of unscale_and_check_all: the AVX2 path for float32 into a 32-byte aligned output
// (every block start is a multiple of 8 elements, so the block stays aligned), the portable one
// otherwise.
bool unscale_block(const Tensor& src, std::int64_t start, std::int64_t n, double inverse,
                   float* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (out != nullptr && src.dtype() == DType::float32 && has_avx2() &&
      reinterpret_cast<std::uintptr_t>(out) % 32 == 0) {
    return unscale_block_avx2(static_cast<const float*>(src.data_ptr()) + start, out + start, n,
                              inverse);
  }
#endif
  return unscaled_non_finite(src, start, n, inverse, out);
}

}  // namespace

bool unscale_and_check_all(std::span<const Tensor> grads, double scale, std::span<Tensor> outs) {
  if (!outs.empty() && outs.size() != grads.size()) {
    throw ValueError("unscale_and_check_all: " + std::to_string(grads.size()) + " gradients but " +
                     std::to_string(outs.size()) + " outputs");
  }
  // Strided gradients are made contiguous first (outside the region: that copy has its own).
  std::vector<Tensor> sources(grads.size());
  std::vector<float*> targets(grads.size(), nullptr);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    sources[i] = grads[i].detach().contiguous();
    if (!outs.empty()) targets[i] = outs[i].data<float>();
  }
  std::int64_t total = 0;
  const std::vector<Block> blocks = split_blocks(
      sources.size(), [&](std::size_t i) { return sources[i].numel(); }, total);
  const double inverse = 1.0 / scale;
  return !parallel_any(static_cast<std::int64_t>(blocks.size()), total >= kParallelThreshold,
                       [&](std::int64_t b) {
                         const Block& block = blocks[static_cast<std::size_t>(b)];
                         return unscale_block(sources[block.item], block.start, block.n, inverse,
                                              targets[block.item]);
                       });
}

bool unscale_and_check(const Tensor& grad, double scale, Tensor& out) {
  return unscale_and_check_all(std::span<const Tensor>(&grad, 1), scale,
                               std::span<Tensor>(&out, 1));
}

bool finite_as_float32(const Tensor& grad) {
  return unscale_and_check_all(std::span<const Tensor>(&grad, 1), 1.0, {});
}

}  // namespace mixprec::cpu
