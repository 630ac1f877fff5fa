// Depthwise convolution kernels (see depthwise.h). One thread per output element (two adjacent
// channels for 16-bit storage in the forward and input-gradient kernels), the channel innermost in
// the thread index, so a warp reads consecutive channels of one pixel: coalesced for x, dy and the
// filters alike. The forward and input-gradient kernels index in 32 bits when the tensors allow,
// and the common windows (square 3x3 and 5x5, stride 1 or 2) are compiled with the window and the
// stride known, so the tap loops unroll and the stride's division is a shift; at dilation 1 with
// multiplier 1 and channel pairs they are register-tiled (depthwise_tiled_kernels.cuh: a thread
// computes 8 outputs of a row, loading each input once per window row), the same sums. The filter
// gradient of a square 3x3 or 5x5 window with multiplier 1 sums every tap in one thread per channel
// group (dy read once per pixel); other windows use one thread per (tap, channel).
#include <algorithm>

#include "backend/cuda/depthwise.h"
#include "backend/cuda/kernels/common.cuh"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/depthwise_kernels.cuh"
#include "backend/cuda/kernels/depthwise_tiled_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace depthwise_kernels;

// About this many threads in the per-(tap, channel) filter gradient's first pass: a few waves on
// any current GPU (H100: 132 SMs x 2048 threads), each thread summing (N * OH / chunks) * OW
// products.
constexpr std::int64_t kFilterThreads = std::int64_t{1} << 18;
// The all-taps pass: about this many threads (each holds K * K * V sums, so fewer are resident),
// at least kTapsMinPixels pixels per chunk, and at most kTapsMaxChunks chunks (the second pass
// reads chunks * E partials).
constexpr std::int64_t kTapsThreads = std::int64_t{1} << 17;
constexpr std::int64_t kTapsMinPixels = 16;
constexpr std::int64_t kTapsMaxChunks = 4096;

}  // namespace

namespace {

bool aligned_to(const void* p, std::size_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0;
}
bool aligned4(const void* p) { return aligned_to(p, 4); }

// 32-bit index arithmetic when every offset into x and y fits (with room for one grid stride).
bool fits_int32(const DepthwiseGeometry& g) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  const std::int64_t cm = g.channels * g.multiplier;
  return g.batch * g.in_h * g.in_w * cm < kLimit && g.batch * g.out_h * g.out_w * cm < kLimit &&
         g.kernel_h * g.kernel_w * cm < kLimit;
}

// Calls go.template operator()<K, S>() with the geometry's square window K (3 or 5) and stride S
// (1 or 2) when Fixed and the geometry has one of them, else with K = S = 0 (runtime). With Fixed
// false only the runtime variant is compiled.
template <bool Fixed, typename Go>
void with_window(const DepthwiseGeometry& g, Go&& go) {
  if constexpr (Fixed) {
    if (g.kernel_h == g.kernel_w && g.stride_h == g.stride_w) {
      const std::int64_t k = g.kernel_h, s = g.stride_h;
      if (k == 3 && s == 1) return go.template operator()<3, 1>();
      if (k == 3 && s == 2) return go.template operator()<3, 2>();
      if (k == 5 && s == 1) return go.template operator()<5, 1>();
      if (k == 5 && s == 2) return go.template operator()<5, 2>();
    }
  }
  go.template operator()<0, 0>();
}

// Calls go.template operator()<I, V, K, S>() with the fastest variant of the forward or
// input-gradient kernel the data allow: channel pairs (V = 2, 16-bit storage) when `pairs`, 32-bit
// indices when `i32`, and a fixed window (with_window) for 16-bit pairs and float32 with 32-bit
// indices only (the fast paths: fewer kernels to compile).
template <typename T, typename Go>
void with_variant(const DepthwiseGeometry& g, bool pairs, bool i32, Go&& go) {
  const auto index32 = [&]<int V, bool Fixed>() {
    with_window<Fixed>(g, [&]<int K, int S>() { go.template operator()<std::int32_t, V, K, S>(); });
  };
  if constexpr (sizeof(T) == 2) {
    if (pairs) {
      i32 ? index32.template operator()<2, true>()
          : go.template operator()<std::int64_t, 2, 0, 0>();
      return;
    }
  }
  i32 ? index32.template operator()<1, sizeof(T) == 4>()
      : go.template operator()<std::int64_t, 1, 0, 0>();
}

// Whether the filter gradient takes filter_taps_kernel: float sums, multiplier 1, square 3x3/5x5.
bool filter_taps_apply(const DepthwiseGeometry& g, Accumulation sum) {
  return sum == Accumulation::float32 && g.multiplier == 1 && g.kernel_h == g.kernel_w &&
         (g.kernel_h == 3 || g.kernel_h == 5);
}

// Whether the register-tiled kernels (depthwise_tiled_kernels.cuh) apply: a square 3x3 or 5x5
// window at dilation 1 and stride S (1 or 2; the input gradient's tiled kernel is for stride 1),
// multiplier 1, channel pairs of 16-bit or float32 storage, 32-bit indices; every pointer aligned
// to a pair.
bool tiled_apply(const DepthwiseGeometry& g, std::size_t size, bool input_gradient,
                 std::initializer_list<const void*> pointers) {
  const bool window = g.kernel_h == g.kernel_w && (g.kernel_h == 3 || g.kernel_h == 5) &&
                      g.dilation_h == 1 && g.dilation_w == 1 && g.stride_h == g.stride_w &&
                      (g.stride_h == 1 || (g.stride_h == 2 && !input_gradient));
  bool aligned = true;
  for (const void* p : pointers) aligned = aligned && (p == nullptr || aligned_to(p, 2 * size));
  return window && size <= 4 && g.multiplier == 1 && g.channels % 2 == 0 && fits_int32(g) &&
         aligned;
}

// Calls go.template operator()<K, S>() for the tiled kernels' window (tiled_apply holds).
template <typename Go>
void with_tiled_window(const DepthwiseGeometry& g, Go&& go) {
  const std::int64_t k = g.kernel_h, s = g.stride_h;
  if (k == 3) {
    s == 1 ? go.template operator()<3, 1>() : go.template operator()<3, 2>();
  } else {
    s == 1 ? go.template operator()<5, 1>() : go.template operator()<5, 2>();
  }
}

// The tiled kernels' grid: one thread per channel pair and tile of `tile` outputs of a row.
std::int64_t tiled_threads(const DepthwiseGeometry& g, std::int64_t rows, std::int64_t width,
                           int tile) {
  return g.batch * rows * ((width + tile - 1) / tile) * (g.channels / 2);
}

}  // namespace

void depthwise_forward(DType dtype, const DepthwiseGeometry& g, const void* x, const void* w,
                       const void* bias, void* y, Accumulation sum, cudaStream_t s) {
  const std::int64_t cm = g.channels * g.multiplier;
  const std::int64_t total = g.batch * g.out_h * g.out_w * cm;
  const bool pairs = cm % 2 == 0 && (g.multiplier == 1 || g.multiplier % 2 == 0) && aligned4(x) &&
                     aligned4(w) && aligned4(y) && (bias == nullptr || aligned4(bias));
  const bool round_each = sum == Accumulation::compute_dtype;
  const bool i32 = fits_int32(g);
  dispatch_floating(dtype, "depthwise_conv2d", [&]<typename T>() {
    if constexpr (sizeof(T) <= 4) {
      if (tiled_apply(g, sizeof(T), false, {x, w, bias, y})) {
        with_tiled_window(g, [&]<int K, int S>() {
          forward_tiled_kernel<T, K, S>
              <<<blocks_for(tiled_threads(g, g.out_h, g.out_w, kTileOf<S>)), kThreads, 0, s>>>(
                  g, static_cast<const T*>(x), static_cast<const T*>(w),
                  static_cast<const T*>(bias), static_cast<T*>(y), round_each);
        });
        return;
      }
    }
    const auto go = [&]<typename I, int V, int K, int S>() {
      forward_kernel<T, I, V, K, S><<<blocks_for(total / V), kThreads, 0, s>>>(
          g, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
          static_cast<T*>(y), round_each);
    };
    with_variant<T>(g, pairs, i32, go);
  });
  check_launch("depthwise_conv2d forward");
}

void depthwise_backward_data(DType dtype, const DepthwiseGeometry& g, const void* dy, const void* w,
                             void* dx, Accumulation sum, cudaStream_t s) {
  const std::int64_t total = g.batch * g.in_h * g.in_w * g.channels;
  const bool pairs =
      g.multiplier == 1 && g.channels % 2 == 0 && aligned4(dy) && aligned4(w) && aligned4(dx);
  const bool round_each = sum == Accumulation::compute_dtype;
  const bool i32 = fits_int32(g);
  dispatch_floating(dtype, "depthwise_conv2d", [&]<typename T>() {
    if constexpr (sizeof(T) <= 4) {
      if (tiled_apply(g, sizeof(T), true, {dy, w, dx})) {
        const auto go = [&]<int K>() {
          backward_data_tiled_kernel<T, K>
              <<<blocks_for(tiled_threads(g, g.in_h, g.in_w, kTileOf<1>)), kThreads, 0, s>>>(
                  g, static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx),
                  round_each);
        };
        g.kernel_h == 3 ? go.template operator()<3>() : go.template operator()<5>();
        return;
      }
    }
    const auto go = [&]<typename I, int V, int K, int S>() {
      backward_data_kernel<T, I, V, K, S><<<blocks_for(total / V), kThreads, 0, s>>>(
          g, static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), round_each);
    };
    with_variant<T>(g, pairs, i32, go);
  });
  check_launch("depthwise_conv2d backward data");
}

std::int64_t depthwise_filter_chunks(const DepthwiseGeometry& g, Accumulation sum) {
  // Rounding every partial sum fixes the summation order: one chunk (slow, as 16-bit
  // accumulation is only a numerics experiment).
  if (sum == Accumulation::compute_dtype) return 1;
  std::int64_t chunks = 1;
  if (filter_taps_apply(g, sum)) {
    const std::int64_t pixels = g.batch * g.out_h * g.out_w;
    const std::int64_t lanes = (g.channels + 1) / 2;
    chunks = (kTapsThreads + lanes - 1) / lanes;
    chunks = std::min({chunks, kTapsMaxChunks, (pixels + kTapsMinPixels - 1) / kTapsMinPixels});
  } else {
    const std::int64_t e_count = g.kernel_h * g.kernel_w * g.channels * g.multiplier;
    chunks = std::min((kFilterThreads + e_count - 1) / e_count, g.batch * g.out_h);
  }
  return chunks < 1 ? 1 : chunks;
}

void depthwise_backward_filters(DType dtype, const DepthwiseGeometry& g, const void* x,
                                const void* dy, void* partials, void* dw, Accumulation sum,
                                cudaStream_t s) {
  const std::int64_t chunks = depthwise_filter_chunks(g, sum);
  const std::int64_t e_count = g.kernel_h * g.kernel_w * g.channels * g.multiplier;
  dispatch_floating(dtype, "depthwise_conv2d", [&]<typename T>() {
    auto* part = static_cast<compute_t<T>*>(partials);
    if (filter_taps_apply(g, sum)) {
      const std::int64_t pixels = g.batch * g.out_h * g.out_w;
      const std::int64_t per_chunk = (pixels + chunks - 1) / chunks;
      const bool pairs =
          g.channels % 2 == 0 && aligned_to(x, 2 * sizeof(T)) && aligned_to(dy, 2 * sizeof(T));
      // The sliding window along the rows where the dilation is 1 and the stride 1 or 2.
      const int slide = g.dilation_w == 1 && (g.stride_w == 1 || g.stride_w == 2)
                            ? static_cast<int>(g.stride_w)
                            : 0;
      const auto go = [&]<int K, int V, int S>() {
        filter_taps_kernel<T, K, V, S><<<blocks_for(chunks * (g.channels / V)), kThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<const T*>(dy), part, chunks, per_chunk);
      };
      const auto with_slide = [&]<int K, int V>() {
        if (slide == 1) return go.template operator()<K, V, 1>();
        if (slide == 2) return go.template operator()<K, V, 2>();
        go.template operator()<K, V, 0>();
      };
      if (g.kernel_h == 3) {
        pairs ? with_slide.template operator()<3, 2>() : with_slide.template operator()<3, 1>();
      } else {
        pairs ? with_slide.template operator()<5, 2>() : with_slide.template operator()<5, 1>();
      }
    } else {
      filter_partials_kernel<T><<<blocks_for(chunks * e_count), kThreads, 0, s>>>(
          g, static_cast<const T*>(x), static_cast<const T*>(dy), part, chunks,
          sum == Accumulation::compute_dtype);
    }
    check_launch("depthwise_conv2d backward filter (partials)");
    filter_finish_kernel<T><<<blocks_for(e_count * kWarp), kThreads, 0, s>>>(part, chunks, e_count,
                                                                             static_cast<T*>(dw));
  });
  check_launch("depthwise_conv2d backward filter");
}

}  // namespace mixprec::cuda::kernels
