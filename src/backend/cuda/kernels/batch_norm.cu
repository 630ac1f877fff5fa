// Batch-normalization launchers (see batch_norm.h; the kernels are in batch_norm_kernels.cuh).
// Per-channel sums in two deterministic steps:
// partial sums by (part, channel) threads in the statistics type P, then one warp per channel
// adding the parts in double in warp_ordered_sum's fixed order (common.cuh): the same bits on every
// run, no atomics. The elementwise kernels compute in P and round once.
#include "backend/cuda/batch_norm.h"
#include "backend/cuda/kernels/common.cuh"
#include "mixprec/error.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/batch_norm_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace batch_norm_kernels;

// The finishing kernels run one warp per channel: kChannelsPerBlock channels per kThreads block.
constexpr int kChannelsPerBlock = kThreads / kWarp;

// About this many threads sum partials: a few waves on current GPUs; each sums rows / parts rows.
constexpr std::int64_t kPartialThreads = std::int64_t{1} << 17;

// Room for one grid stride past the end: a 32-bit index never overflows.
bool fits_int32(std::int64_t total) { return total < (std::int64_t{1} << 30); }

unsigned blocks_exact(std::int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// The finishing kernels' grid: one warp per channel.
unsigned blocks_per_channel_warp(std::int64_t channels) {
  return static_cast<unsigned>((channels + kChannelsPerBlock - 1) / kChannelsPerBlock);
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

}  // namespace

std::int64_t batch_norm_parts(std::int64_t rows, std::int64_t channels) {
  std::int64_t parts = kPartialThreads / (channels > 0 ? channels : 1);
  if (parts > rows) parts = rows;
  return parts < 1 ? 1 : parts;
}

void batch_norm_mean(DType dtype, const void* x, std::int64_t rows, std::int64_t channels,
                     void* partials, void* mean, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    partial_sums_kernel<T><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
        Sums::x, static_cast<const T*>(x), nullptr, nullptr, rows, channels, parts,
        static_cast<P*>(partials));
    check_launch("batch_norm partial sums");
    mean_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
        static_cast<const P*>(partials), parts, channels, rows, static_cast<P*>(mean));
  });
  check_launch("batch_norm mean");
}

void batch_norm_variance(DType dtype, const void* x, const void* mean, const void* gamma,
                         double epsilon, std::int64_t rows, std::int64_t channels, void* partials,
                         void* variance, void* scale, cudaStream_t s) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    partial_sums_kernel<T><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
        Sums::squared_deviation, static_cast<const T*>(x), nullptr, static_cast<const P*>(mean),
        rows, channels, parts, static_cast<P*>(partials));
    check_launch("batch_norm partial sums");
    scale_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
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
    scale_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
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
      const auto go = [&]<typename I>() {
        normalize_kernel<T, I, Act><<<blocks_for(total), kThreads, 0, s>>>(
            static_cast<const T*>(x), static_cast<const P*>(mean), static_cast<const P*>(scale),
            static_cast<const P*>(beta), static_cast<I>(total), static_cast<I>(channels),
            static_cast<T*>(y));
      };
      fits_int32(total) ? go.template operator()<std::int32_t>()
                        : go.template operator()<std::int64_t>();
    });
  });
  check_launch("batch_norm normalize");
}

void batch_norm_backward(DType dtype, const void* dy, const void* x, const void* mean,
                         const void* variance, const void* gamma, double epsilon,
                         bool batch_statistics, std::int64_t rows, std::int64_t channels,
                         void* partials, void* coefficients, void* dgamma, void* dbeta, void* dx,
                         cudaStream_t s, BnActivation act, const void* scale, const void* beta) {
  const std::int64_t parts = batch_norm_parts(rows, channels);
  const std::int64_t total = rows * channels;
  dispatch_floating(dtype, "batch_norm", [&]<typename T>() {
    using P = compute_t<T>;
    const auto* k = static_cast<const P*>(scale);
    const auto* b = static_cast<const P*>(beta);
    with_activation<T>(act, [&]<typename Act>() {
      partial_sums_kernel<T, Act><<<blocks_exact(parts * channels), kThreads, 0, s>>>(
          Sums::gradient, static_cast<const T*>(x), static_cast<const T*>(dy),
          static_cast<const P*>(mean), rows, channels, parts, static_cast<P*>(partials), k, b);
      check_launch("batch_norm backward partial sums");
      backward_coefficients_kernel<P><<<blocks_per_channel_warp(channels), kThreads, 0, s>>>(
          static_cast<const P*>(partials), parts, channels, rows, static_cast<const P*>(variance),
          static_cast<const P*>(gamma), static_cast<P>(epsilon), batch_statistics,
          static_cast<P*>(coefficients), static_cast<P*>(dgamma), static_cast<P*>(dbeta));
      check_launch("batch_norm backward coefficients");
      const auto go = [&]<typename I>() {
        backward_dx_kernel<T, I, Act><<<blocks_for(total), kThreads, 0, s>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const P*>(mean),
            static_cast<const P*>(coefficients), static_cast<I>(total), static_cast<I>(channels),
            static_cast<T*>(dx), k, b);
      };
      fits_int32(total) ? go.template operator()<std::int32_t>()
                        : go.template operator()<std::int64_t>();
    });
  });
  check_launch("batch_norm backward dx");
}

}  // namespace mixprec::cuda::kernels
