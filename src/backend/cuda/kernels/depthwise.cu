// Depthwise convolution kernels (see depthwise.h). One thread per output element (two adjacent
// channels for 16-bit storage in the forward and input-gradient kernels), the channel innermost in
// the thread index, so a warp reads consecutive channels of one pixel: coalesced for x, dy and the
// filters alike. The forward and input-gradient kernels index in 32 bits when the tensors allow,
// and the common windows (square 3x3 and 5x5, stride 1 or 2) are compiled with the window and the
// stride known, so the tap loops unroll and the stride's division is a shift. The filter gradient
// of a square 3x3 or 5x5 window with multiplier 1 sums every tap in one thread per channel group
// (dy read once per pixel); other windows use one thread per (tap, channel).
#include <algorithm>

#include "backend/cuda/depthwise.h"
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

// With `storage`, s = T(s + a * b) at every step (a product of two 16-bit values is exact in float,
// so fused or not, each step rounds as the CPU reference does).
template <typename T>
__device__ __forceinline__ compute_t<T> settle(compute_t<T> s, bool round_each) {
  return round_each ? to_compute(from_compute<T>(s)) : s;
}

// V adjacent values, loaded or stored as one access of V * sizeof(T) bytes.
template <typename T, int V>
struct alignas(V * sizeof(T)) Lanes {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Lanes<T, V> load_lanes(const T* p) {
  return *reinterpret_cast<const Lanes<T, V>*>(p);
}

// The window's extent and stride: compile-time K and S (square K x K, stride S in both axes) when
// positive, else the geometry's (runtime).
template <typename I, int K, int S>
struct Window {
  I kernel_h, kernel_w, stride_h, stride_w;
  __device__ __forceinline__ explicit Window(const DepthwiseGeometry& g)
      : kernel_h(K > 0 ? I(K) : static_cast<I>(g.kernel_h)),
        kernel_w(K > 0 ? I(K) : static_cast<I>(g.kernel_w)),
        stride_h(S > 0 ? I(S) : static_cast<I>(g.stride_h)),
        stride_w(S > 0 ? I(S) : static_cast<I>(g.stride_w)) {}
};

// One thread computes V adjacent output channels (V = 2 for 16-bit storage: one 4-byte load of the
// filter pair and of the input pair (M == 1) or one input value shared by both (even M), one 4-byte
// store). Index arithmetic in I: 32-bit when every offset fits (far cheaper division than 64-bit).
// K, S > 0: a square K x K window of stride S (the tap loops unroll).
template <typename T, typename I, int V, int K, int S>
__global__ void forward_kernel(DepthwiseGeometry geometry, const T* __restrict__ x,
                               const T* __restrict__ w, const T* __restrict__ bias,
                               T* __restrict__ y, bool round_each) {
  using C = compute_t<T>;
  constexpr int kUnroll = K > 0 ? K : 1;  // a runtime window: the loops as written
  const Window<I, K, S> win(geometry);
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I dil_h = static_cast<I>(geometry.dilation_h), dil_w = static_cast<I>(geometry.dilation_w);
  const I pad_top = static_cast<I>(geometry.pad_top), pad_left = static_cast<I>(geometry.pad_left);
  const I out_h = static_cast<I>(geometry.out_h), out_w = static_cast<I>(geometry.out_w);
  const I cm = channels * m;
  const I groups = static_cast<I>(geometry.batch) * out_h * out_w * (cm / V);
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V;  // the first of the V output elements
    const I oc = i % cm;
    I t = i / cm;
    const I ow = t % out_w;
    t /= out_w;
    const I oh = t % out_h, n = t / out_h;
    C s[V];
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] = C(0);
#pragma unroll kUnroll
    for (I kh = 0; kh < win.kernel_h; ++kh) {
      const I ih = oh * win.stride_h - pad_top + kh * dil_h;
      if (ih < 0 || ih >= in_h) continue;  // zero padding
#pragma unroll kUnroll
      for (I kw = 0; kw < win.kernel_w; ++kw) {
        const I iw = ow * win.stride_w - pad_left + kw * dil_w;
        if (iw < 0 || iw >= in_w) continue;
        const T* xp = x + ((n * in_h + ih) * in_w + iw) * channels;
        const T* wp = w + (kh * win.kernel_w + kw) * cm + oc;
        if constexpr (V == 2) {
          const Lanes<T, 2> wv = load_lanes<T, 2>(wp);
          C a0, a1;
          if (m == 1) {  // channels oc, oc + 1 read inputs oc, oc + 1
            const Lanes<T, 2> xv = load_lanes<T, 2>(xp + oc);
            a0 = to_compute(xv.v[0]), a1 = to_compute(xv.v[1]);
          } else {  // even M: both read input oc / M
            a0 = a1 = to_compute(xp[oc / m]);
          }
          s[0] = settle<T>(s[0] + a0 * to_compute(wv.v[0]), round_each);
          s[1] = settle<T>(s[1] + a1 * to_compute(wv.v[1]), round_each);
        } else {
          s[0] = settle<T>(s[0] + to_compute(xp[oc / m]) * to_compute(wp[0]), round_each);
        }
      }
    }
    if constexpr (V == 2) {
      if (bias != nullptr) {
        const Lanes<T, 2> bv = load_lanes<T, 2>(bias + oc);
        s[0] += to_compute(bv.v[0]), s[1] += to_compute(bv.v[1]);
      }
      *reinterpret_cast<Lanes<T, 2>*>(y + i) =
          Lanes<T, 2>{{from_compute<T>(s[0]), from_compute<T>(s[1])}};
    } else {
      if (bias != nullptr) s[0] += to_compute(bias[oc]);
      y[i] = from_compute<T>(s[0]);
    }
  }
}

// dx[n, ih, iw, c] = sum over (kh, kw, m) of dy[n, oh, ow, c * M + m] w[kh, kw, c * M + m] for the
// (oh, ow) whose tap (kh, kw) reads (ih, iw); the CPU reference's order (kh, kw, m). V = 2 (16-bit,
// M == 1): channels c, c + 1 with 4-byte loads of dy and w and a 4-byte store. K, S as forward.
template <typename T, typename I, int V, int K, int S>
__global__ void backward_data_kernel(DepthwiseGeometry geometry, const T* __restrict__ dy,
                                     const T* __restrict__ w, T* __restrict__ dx, bool round_each) {
  using C = compute_t<T>;
  constexpr int kUnroll = K > 0 ? K : 1;  // a runtime window: the loops as written
  const Window<I, K, S> win(geometry);
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I dil_h = static_cast<I>(geometry.dilation_h), dil_w = static_cast<I>(geometry.dilation_w);
  const I pad_top = static_cast<I>(geometry.pad_top), pad_left = static_cast<I>(geometry.pad_left);
  const I out_h = static_cast<I>(geometry.out_h), out_w = static_cast<I>(geometry.out_w);
  const I cm = channels * m;
  const I groups = static_cast<I>(geometry.batch) * in_h * in_w * (channels / V);
  for (I q = static_cast<I>(global_thread()); q < groups; q += static_cast<I>(grid_threads())) {
    const I i = q * V;
    const I c = i % channels;
    I t = i / channels;
    const I iw = t % in_w;
    t /= in_w;
    const I ih = t % in_h, n = t / in_h;
    C s[V];
#pragma unroll
    for (int v = 0; v < V; ++v) s[v] = C(0);
#pragma unroll kUnroll
    for (I kh = 0; kh < win.kernel_h; ++kh) {
      const I th = ih + pad_top - kh * dil_h;
      if (th < 0 || th % win.stride_h != 0 || th / win.stride_h >= out_h) continue;
      const I oh = th / win.stride_h;
#pragma unroll kUnroll
      for (I kw = 0; kw < win.kernel_w; ++kw) {
        const I tw = iw + pad_left - kw * dil_w;
        if (tw < 0 || tw % win.stride_w != 0 || tw / win.stride_w >= out_w) continue;
        const I ow = tw / win.stride_w;
        const T* dyp = dy + ((n * out_h + oh) * out_w + ow) * cm + c * m;
        const T* wp = w + (kh * win.kernel_w + kw) * cm + c * m;
        if constexpr (V == 2) {
          const Lanes<T, 2> gv = load_lanes<T, 2>(dyp);
          const Lanes<T, 2> wv = load_lanes<T, 2>(wp);
          s[0] = settle<T>(s[0] + to_compute(gv.v[0]) * to_compute(wv.v[0]), round_each);
          s[1] = settle<T>(s[1] + to_compute(gv.v[1]) * to_compute(wv.v[1]), round_each);
        } else {
          for (I j = 0; j < m; ++j) {
            s[0] = settle<T>(s[0] + to_compute(dyp[j]) * to_compute(wp[j]), round_each);
          }
        }
      }
    }
    if constexpr (V == 2) {
      *reinterpret_cast<Lanes<T, 2>*>(dx + i) =
          Lanes<T, 2>{{from_compute<T>(s[0]), from_compute<T>(s[1])}};
    } else {
      dx[i] = from_compute<T>(s[0]);
    }
  }
}

// Pass 1 of the filter gradient, any window: thread (p, e), e = (kh, kw, oc) innermost, sums
// x[n, ih, iw, oc / M] dy[n, oh, ow, oc] over the rows (n, oh) of chunk p (all ow) into
// partials[p * E + e], in the CPU reference's order (n, oh, ow).
template <typename T>
__global__ void filter_partials_kernel(DepthwiseGeometry g, const T* __restrict__ x,
                                       const T* __restrict__ dy,
                                       compute_t<T>* __restrict__ partials, std::int64_t chunks,
                                       bool round_each) {
  using C = compute_t<T>;
  const std::int64_t cm = g.channels * g.multiplier;
  const std::int64_t e_count = g.kernel_h * g.kernel_w * cm;
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t per_chunk = (rows + chunks - 1) / chunks;
  const std::int64_t total = chunks * e_count;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t e = i % e_count, p = i / e_count;
    const std::int64_t oc = e % cm, kw = (e / cm) % g.kernel_w, kh = e / (cm * g.kernel_w);
    const std::int64_t c = oc / g.multiplier;
    const std::int64_t r_end = (p + 1) * per_chunk < rows ? (p + 1) * per_chunk : rows;
    C s = C(0);
    for (std::int64_t r = p * per_chunk; r < r_end; ++r) {
      const std::int64_t n = r / g.out_h, oh = r % g.out_h;
      const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) continue;
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_w) continue;
        const C a = to_compute(x[((n * g.in_h + ih) * g.in_w + iw) * g.channels + c]);
        const C b = to_compute(dy[((n * g.out_h + oh) * g.out_w + ow) * cm + oc]);
        s = settle<T>(s + a * b, round_each);
      }
    }
    partials[i] = s;
  }
}

// Pass 1 of the filter gradient for a square K x K window with multiplier 1 (float sums): thread
// (p, j), the group j of V adjacent channels innermost, sums the products of all K * K taps at
// once over the output pixels [p * per_chunk, (p + 1) * per_chunk) of the (n, oh, ow) order, each
// tap in (n, oh, ow) order. dy is read once per pixel (consecutive threads: consecutive channels,
// coalesced), each tap's x from L1/L2 (neighbouring pixels share them). The same partials layout
// as filter_partials_kernel: partials[p * E + (kh * K + kw) * C + c].
template <typename T, int K, int V>
__global__ void filter_taps_kernel(DepthwiseGeometry g, const T* __restrict__ x,
                                   const T* __restrict__ dy, compute_t<T>* __restrict__ partials,
                                   std::int64_t chunks, std::int64_t per_chunk) {
  using C = compute_t<T>;
  const std::int64_t channels = g.channels;
  const std::int64_t lanes = channels / V;  // channel groups
  const std::int64_t pixels = g.batch * g.out_h * g.out_w;
  const std::int64_t e_count = K * K * channels;
  const std::int64_t image = g.in_h * g.in_w * channels;
  const std::int64_t total = chunks * lanes;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t c = (i % lanes) * V, p = i / lanes;
    C s[K * K][V];
#pragma unroll
    for (int tap = 0; tap < K * K; ++tap) {
#pragma unroll
      for (int v = 0; v < V; ++v) s[tap][v] = C(0);
    }
    const std::int64_t begin = p * per_chunk;
    const std::int64_t end = begin + per_chunk < pixels ? begin + per_chunk : pixels;
    std::int64_t ow = begin % g.out_w, oh = (begin / g.out_w) % g.out_h;
    std::int64_t xn = (begin / (g.out_w * g.out_h)) * image + c;  // image n of pixel `begin`
    for (std::int64_t q = begin; q < end; ++q) {
      const Lanes<T, V> gv = load_lanes<T, V>(dy + q * channels + c);
      const std::int64_t ih0 = oh * g.stride_h - g.pad_top, iw0 = ow * g.stride_w - g.pad_left;
#pragma unroll
      for (int kh = 0; kh < K; ++kh) {
        const std::int64_t ih = ih0 + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;  // zero padding
        const T* xrow = x + xn + ih * g.in_w * channels;
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
          const std::int64_t iw = iw0 + kw * g.dilation_w;
          if (iw < 0 || iw >= g.in_w) continue;
          const Lanes<T, V> xv = load_lanes<T, V>(xrow + iw * channels);
#pragma unroll
          for (int v = 0; v < V; ++v) {
            s[kh * K + kw][v] += to_compute(xv.v[v]) * to_compute(gv.v[v]);
          }
        }
      }
      if (++ow == g.out_w) {  // the next pixel: (n, oh, ow) in row-major order
        ow = 0;
        if (++oh == g.out_h) oh = 0, xn += image;
      }
    }
    C* out = partials + p * e_count + c;
#pragma unroll
    for (int tap = 0; tap < K * K; ++tap) {
#pragma unroll
      for (int v = 0; v < V; ++v) out[tap * channels + v] = s[tap][v];
    }
  }
}

// Pass 2: dw[e] = the chunks' partial sums added in double in warp_ordered_sum's fixed order (one
// warp per filter element), rounded once.
template <typename T>
__global__ void filter_finish_kernel(const compute_t<T>* __restrict__ partials, std::int64_t chunks,
                                     std::int64_t e_count, T* __restrict__ dw) {
  // e is the same for the 32 lanes of a warp (the grid stride is whole warps): they loop together.
  const std::int64_t warps = grid_threads() / kWarp;
  for (std::int64_t e = global_thread() / kWarp; e < e_count; e += warps) {
    const double s = warp_ordered_sum(partials + e, chunks, e_count);
    if (warp_lane() == 0) dw[e] = from_compute<T>(static_cast<compute_t<T>>(s));
  }
}

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
      const auto go = [&]<int K, int V>() {
        filter_taps_kernel<T, K, V><<<blocks_for(chunks * (g.channels / V)), kThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<const T*>(dy), part, chunks, per_chunk);
      };
      if (g.kernel_h == 3) {
        pairs ? go.template operator()<3, 2>() : go.template operator()<3, 1>();
      } else {
        pairs ? go.template operator()<5, 2>() : go.template operator()<5, 1>();
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
