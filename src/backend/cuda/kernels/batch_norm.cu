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

// Room for one grid stride past the end: a 32-bit index never overflows.
bool fits_int32(std::int64_t total) { return total < (std::int64_t{1} << 30); }

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

// Pass 1 of a per-channel sum (Sums W): the partial sums kernel for the vector width the data
// allow.
template <typename T, Sums W, typename Act>
void launch_partial_sums(const T* x, const T* dy, const compute_t<T>* mean, std::int64_t rows,
                         std::int64_t channels, std::int64_t parts, compute_t<T>* partials,
                         const compute_t<T>* scale, const compute_t<T>* shift, cudaStream_t s) {
  with_vector<T>(channels, {x, dy}, [&]<int V>() {
    partial_sums_kernel<T, W, Act, V><<<blocks_exact(parts * (channels / V)), kThreads, 0, s>>>(
        x, dy, mean, rows, channels, parts, partials, scale, shift);
  });
  check_launch("batch_norm partial sums");
}

}  // namespace

std::int64_t batch_norm_parts(DType dtype, std::int64_t rows, std::int64_t channels) {
  const std::int64_t c = channels > 0 ? channels : 1;
  const std::int64_t lanes = c / vector_of(dtype_size(dtype), c);
  std::int64_t parts = std::min({kPartialThreads / lanes, kMaxParts, rows});
  return parts < 1 ? 1 : parts;
}

void batch_norm_mean(DType dtype, const void* x, std::int64_t rows, std::int64_t channels,
                     void* partials, void* mean, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(dtype, rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    launch_partial_sums<T, Sums::x, Identity>(static_cast<const T*>(x), nullptr, nullptr, rows,
                                              channels, parts, static_cast<P*>(partials), nullptr,
                                              nullptr, s);
    mean_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(mean));
  });
  check_launch("batch_norm mean");
}

void batch_norm_variance(DType dtype, const void* x, const void* mean, const void* gamma,
                         double epsilon, std::int64_t rows, std::int64_t channels, void* partials,
                         void* variance, void* scale, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(dtype, rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    launch_partial_sums<T, Sums::squared_deviation, Identity>(
        static_cast<const T*>(x), nullptr, static_cast<const P*>(mean), rows, channels, parts,
        static_cast<P*>(partials), nullptr, nullptr, s);
    scale_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(variance),
        static_cast<const P*>(gamma), static_cast<P>(epsilon), static_cast<P*>(scale));
  });
  check_launch("batch_norm variance");
}

void batch_norm_scale(DType dtype, const void* variance, const void* gamma, double epsilon,
                      std::int64_t channels, void* scale, cudaStream_t s) {
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    // partials == nullptr: the variance is read, never written.
    scale_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
        nullptr, 0, channels, 0, const_cast<P*>(static_cast<const P*>(variance)),
        static_cast<const P*>(gamma), static_cast<P>(epsilon), static_cast<P*>(scale));
  });
  check_launch("batch_norm scale");
}

void batch_norm_normalize(DType dtype, const void* x, const void* mean, const void* scale,
                          const void* beta, std::int64_t rows, std::int64_t channels, void* y,
                          cudaStream_t s, BnActivation act) {
  const std::int64_t total = rows * channels;
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    with_activation<T>(act, [&]<typename Act>() {
      const auto go = [&]<typename I, int V>() {
        normalize_kernel<T, I, Act, V><<<blocks_for(total / V), kThreads, 0, s>>>(
            static_cast<const T*>(x), static_cast<const P*>(mean), static_cast<const P*>(scale),
            static_cast<const P*>(beta), static_cast<I>(total), static_cast<I>(channels),
            static_cast<T*>(y));
      };
      if (!fits_int32(total)) return go.template operator()<std::int64_t, 1>();
      with_vector<T>(channels, {x, y}, [&]<int V>() { go.template operator()<std::int32_t, V>(); });
    });
  });
  check_launch("batch_norm normalize");
}

void batch_norm_backward(DType dtype, const void* dy, const void* x, const void* mean,
                         const void* variance, const void* gamma, double epsilon,
                         bool batch_statistics, std::int64_t rows, std::int64_t channels,
                         void* partials, void* coefficients, void* dgamma, void* dbeta, void* dx,
                         cudaStream_t s, BnActivation act, const void* scale, const void* beta) {
  const std::int64_t parts = batch_norm_parts(dtype, rows, channels);
  const std::int64_t total = rows * channels;
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    const auto* k = static_cast<const P*>(scale);
    const auto* b = static_cast<const P*>(beta);
    with_activation<T>(act, [&]<typename Act>() {
      launch_partial_sums<T, Sums::gradient, Act>(
          static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const P*>(mean), rows,
          channels, parts, static_cast<P*>(partials), k, b, s);
      backward_coefficients_kernel<P><<<blocks_per_channel(channels), kThreads, 0, s>>>(
          static_cast<const P*>(partials), parts, channels, rows, static_cast<const P*>(variance),
          static_cast<const P*>(gamma), static_cast<P>(epsilon), batch_statistics,
          static_cast<P*>(coefficients), static_cast<P*>(dgamma), static_cast<P*>(dbeta));
      check_launch("batch_norm backward coefficients");
      const auto go = [&]<typename I, int V>() {
        backward_dx_kernel<T, I, Act, V><<<blocks_for(total / V), kThreads, 0, s>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const P*>(mean),
            static_cast<const P*>(coefficients), static_cast<I>(total), static_cast<I>(channels),
            static_cast<T*>(dx), k, b);
      };
      if (!fits_int32(total)) return go.template operator()<std::int64_t, 1>();
      with_vector<T>(channels, {dy, x, dx},
                     [&]<int V>() { go.template operator()<std::int32_t, V>(); });
    });
  });
  check_launch("batch_norm backward dx");
}

}  // namespace mixprec::cuda::kernels
