// Batch-normalization launchers (see batch_norm.h; the kernels are in batch_norm_kernels.cuh).
// Per-channel sums in two deterministic steps: partial sums by (part, channel vector) threads in
// the statistics type P, then one block per channel adding the parts in double in
// block_ordered_sum's fixed order (common.cuh): the same bits on every run, no atomics. The
// elementwise kernels compute in P and round once. The memory-bound passes move V = 16 bytes of
// channels per load where the channel count and the pointers allow.
#include <algorithm>

#include "backend/cuda/batch_norm.h"
#include "backend/cuda/kernels/common.cuh"
#include "mixprec/error.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/batch_norm_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace batch_norm_kernels;

// About this many threads sum partials (a few waves on current GPUs), with at most kMaxParts
// parts per channel (the finishing block reads parts / kThreads values per thread).
constexpr std::int64_t kPartialThreads = std::int64_t{1} << 17;
constexpr std::int64_t kMaxParts = 8192;
// The elementwise passes (normalize, dx): about this many threads, each over several rows of its
// channels so that their per-channel values, in registers, serve many loads.
constexpr std::int64_t kElementwiseThreads = std::int64_t{1} << 18;

unsigned blocks_exact(std::int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// The finishing kernels' grid: one block per channel.
unsigned blocks_per_channel(std::int64_t channels) { return static_cast<unsigned>(channels); }

// Values per vector load: 16 bytes of T where the channel count allows.
template <typename T>
constexpr std::int64_t kVector = 16 / sizeof(T);
std::int64_t vector_of(std::size_t size, std::int64_t channels) {
  const std::int64_t v = 16 / static_cast<std::int64_t>(size);
  return channels % v == 0 ? v : 1;
}

bool aligned16_all(std::initializer_list<const void*> pointers) {
  return std::all_of(pointers.begin(), pointers.end(),
                     [](const void* p) { return p == nullptr || aligned16(p); });
}

// Calls f.template operator()<V>() with V = kVector<T> when the channel count and the pointers
// allow, else 1.
template <typename T, typename F>
void with_vector(std::int64_t channels, std::initializer_list<const void*> pointers, F&& f) {
  if (channels % kVector<T> == 0 && aligned16_all(pointers)) {
    f.template operator()<static_cast<int>(kVector<T>)>();
  } else {
    f.template operator()<1>();
  }
}

// Calls f.template operator()<Act>() with the kernels' Identity or Activation<A> for `act`;
// storage T of 8 bytes (float64) has no fused activation (the op composes it).
template <typename T, typename F>
void with_activation(BnActivation act, F&& f) {
  if constexpr (sizeof(T) < 8) {
    switch (act) {
      case BnActivation::none: break;
      case BnActivation::relu: return f.template operator()<Activation<UnaryOp::relu>>();
      case BnActivation::relu6: return f.template operator()<Activation<UnaryOp::relu6>>();
      case BnActivation::sigmoid: return f.template operator()<Activation<UnaryOp::sigmoid>>();
      case BnActivation::silu: return f.template operator()<Activation<UnaryOp::silu>>();
    }
  } else if (act != BnActivation::none) {
    throw DTypeError("batch_norm: no fused activation for float64 x");
  }
  f.template operator()<Identity>();
}

// The threads of a Slot grid: parts * (C / V), in whole blocks.
unsigned slot_blocks(std::int64_t parts, std::int64_t channels, int v) {
  return blocks_exact(parts * (channels / v));
}

}  // namespace

std::int64_t batch_norm_parts(DType dtype, std::int64_t rows, std::int64_t channels) {
  const std::int64_t c = channels > 0 ? channels : 1;
  const std::int64_t lanes = c / vector_of(dtype_size(dtype), c);
  std::int64_t parts = std::min({kPartialThreads / lanes, kMaxParts, rows});
  return parts < 1 ? 1 : parts;
}

std::int64_t batch_norm_elementwise_parts(std::int64_t lanes, std::int64_t rows) {
  const std::int64_t parts = std::min(kElementwiseThreads / (lanes > 0 ? lanes : 1), rows);
  return parts < 1 ? 1 : parts;
}

void batch_norm_statistics(DType dtype, const void* x, std::int64_t rows, std::int64_t channels,
                           void* partials, void* mean, void* variance, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(dtype, rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    with_vector<T>(channels, {x}, [&]<int V>() {
      moments_kernel<T, V><<<slot_blocks(parts, channels, V), kThreads, 0, s>>>(
          static_cast<const T*>(x), rows, channels, parts, static_cast<P*>(partials));
    });
    check_launch("batch_norm moments");
    statistics_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(mean),
        static_cast<P*>(variance));
  });
  check_launch("batch_norm statistics");
}

void batch_norm_normalize(DType dtype, const void* x, const void* mean, const void* variance,
                          const void* gamma, const void* beta, double epsilon, std::int64_t rows,
                          std::int64_t channels, void* y, cudaStream_t s, BnActivation act) {
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    with_activation<T>(act, [&]<typename Act>() {
      with_vector<T>(channels, {x, y}, [&]<int V>() {
        const std::int64_t parts = batch_norm_elementwise_parts(channels / V, rows);
        normalize_kernel<T, Act, V><<<slot_blocks(parts, channels, V), kThreads, 0, s>>>(
            static_cast<const T*>(x), static_cast<const P*>(mean), static_cast<const P*>(variance),
            static_cast<const P*>(gamma), static_cast<const P*>(beta), static_cast<P>(epsilon),
            rows, channels, parts, static_cast<T*>(y));
      });
    });
  });
  check_launch("batch_norm normalize");
}

void batch_norm_backward(DType dtype, const void* dy, const void* x, const void* mean,
                         const void* variance, const void* gamma, const void* beta, double epsilon,
                         bool batch_statistics, std::int64_t rows, std::int64_t channels,
                         void* partials, void* coefficients, void* dgamma, void* dbeta, void* dx,
                         cudaStream_t s, BnActivation act) {
  const std::int64_t parts = batch_norm_parts(dtype, rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    const auto* m = static_cast<const P*>(mean);
    const auto* var = static_cast<const P*>(variance);
    const auto* g = static_cast<const P*>(gamma);
    const auto* b = static_cast<const P*>(beta);
    const P eps = static_cast<P>(epsilon);
    auto* k = static_cast<P*>(coefficients);
    with_activation<T>(act, [&]<typename Act>() {
      with_vector<T>(channels, {x, dy}, [&]<int V>() {
        gradient_sums_kernel<T, Act, V><<<slot_blocks(parts, channels, V), kThreads, 0, s>>>(
            static_cast<const T*>(x), static_cast<const T*>(dy), m, var, g, b, eps, rows, channels,
            parts, static_cast<P*>(partials));
      });
      check_launch("batch_norm gradient sums");
      backward_coefficients_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
          static_cast<const P*>(partials), parts, channels, rows, var, g, eps, batch_statistics, k,
          static_cast<P*>(dgamma), static_cast<P*>(dbeta));
      check_launch("batch_norm backward coefficients");
      with_vector<T>(channels, {dy, x, dx}, [&]<int V>() {
        const std::int64_t dx_parts = batch_norm_elementwise_parts(channels / V, rows);
        backward_dx_kernel<T, Act, V><<<slot_blocks(dx_parts, channels, V), kThreads, 0, s>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), m, k, b, rows, channels, dx_parts,
            static_cast<T*>(dx));
      });
    });
  });
  check_launch("batch_norm backward dx");
}

}  // namespace mixprec::cuda::kernels
