// Depthwise convolution kernels (see depthwise.h). One thread per output element (two adjacent
// channels for 16-bit storage in the forward and input-gradient kernels), the channel innermost in
// the thread index, so a warp reads consecutive channels of one pixel: coalesced for x, dy and the
// filters alike. The forward and input-gradient kernels index in 32 bits when the tensors allow;
// the filter gradient (a small share of the time) in 64.
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

// Two adjacent 16-bit values, loaded or stored as one 4-byte access.
template <typename T>
struct alignas(2 * sizeof(T)) Two {
  T a, b;
};

// One thread computes V adjacent output channels (V = 2 for 16-bit storage: one 4-byte load of the
// filter pair and of the input pair (M == 1) or one input value shared by both (even M), one 4-byte
// store). Index arithmetic in I: 32-bit when every offset fits (far cheaper division than 64-bit).
template <typename T, typename I, int V>
__global__ void forward_kernel(DepthwiseGeometry geometry, const T* __restrict__ x,
                               const T* __restrict__ w, const T* __restrict__ bias,
                               T* __restrict__ y, bool round_each) {
  using C = compute_t<T>;
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I kernel_h = static_cast<I>(geometry.kernel_h),
          kernel_w = static_cast<I>(geometry.kernel_w);
  const I stride_h = static_cast<I>(geometry.stride_h),
          stride_w = static_cast<I>(geometry.stride_w);
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
    for (I kh = 0; kh < kernel_h; ++kh) {
      const I ih = oh * stride_h - pad_top + kh * dil_h;
      if (ih < 0 || ih >= in_h) continue;  // zero padding
      for (I kw = 0; kw < kernel_w; ++kw) {
        const I iw = ow * stride_w - pad_left + kw * dil_w;
        if (iw < 0 || iw >= in_w) continue;
        const T* xp = x + ((n * in_h + ih) * in_w + iw) * channels;
        const T* wp = w + (kh * kernel_w + kw) * cm + oc;
        if constexpr (V == 2) {
          const Two<T> wv = *reinterpret_cast<const Two<T>*>(wp);
          C a0, a1;
          if (m == 1) {  // channels oc, oc + 1 read inputs oc, oc + 1
            const Two<T> xv = *reinterpret_cast<const Two<T>*>(xp + oc);
            a0 = to_compute(xv.a), a1 = to_compute(xv.b);
          } else {  // even M: both read input oc / M
            a0 = a1 = to_compute(xp[oc / m]);
          }
          s[0] = settle<T>(s[0] + a0 * to_compute(wv.a), round_each);
          s[1] = settle<T>(s[1] + a1 * to_compute(wv.b), round_each);
        } else {
          s[0] = settle<T>(s[0] + to_compute(xp[oc / m]) * to_compute(wp[0]), round_each);
        }
      }
    }
    if constexpr (V == 2) {
      if (bias != nullptr) {
        const Two<T> bv = *reinterpret_cast<const Two<T>*>(bias + oc);
        s[0] += to_compute(bv.a), s[1] += to_compute(bv.b);
      }
      *reinterpret_cast<Two<T>*>(y + i) = Two<T>{from_compute<T>(s[0]), from_compute<T>(s[1])};
    } else {
      if (bias != nullptr) s[0] += to_compute(bias[oc]);
      y[i] = from_compute<T>(s[0]);
    }
  }
}

// dx[n, ih, iw, c] = sum over (kh, kw, m) of dy[n, oh, ow, c * M + m] w[kh, kw, c * M + m] for the
// (oh, ow) whose tap (kh, kw) reads (ih, iw); the CPU reference's order (kh, kw, m). V = 2 (16-bit,
// M == 1): channels c, c + 1 with 4-byte loads of dy and w and a 4-byte store.
template <typename T, typename I, int V>
__global__ void backward_data_kernel(DepthwiseGeometry geometry, const T* __restrict__ dy,
                                     const T* __restrict__ w, T* __restrict__ dx, bool round_each) {
  using C = compute_t<T>;
  const I in_h = static_cast<I>(geometry.in_h), in_w = static_cast<I>(geometry.in_w);
  const I channels = static_cast<I>(geometry.channels), m = static_cast<I>(geometry.multiplier);
  const I kernel_h = static_cast<I>(geometry.kernel_h),
          kernel_w = static_cast<I>(geometry.kernel_w);
  const I stride_h = static_cast<I>(geometry.stride_h),
          stride_w = static_cast<I>(geometry.stride_w);
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
    for (I kh = 0; kh < kernel_h; ++kh) {
      const I th = ih + pad_top - kh * dil_h;
      if (th < 0 || th % stride_h != 0 || th / stride_h >= out_h) continue;
      const I oh = th / stride_h;
      for (I kw = 0; kw < kernel_w; ++kw) {
        const I tw = iw + pad_left - kw * dil_w;
        if (tw < 0 || tw % stride_w != 0 || tw / stride_w >= out_w) continue;
        const I ow = tw / stride_w;
        const T* dyp = dy + ((n * out_h + oh) * out_w + ow) * cm + c * m;
        const T* wp = w + (kh * kernel_w + kw) * cm + c * m;
        if constexpr (V == 2) {
          const Two<T> gv = *reinterpret_cast<const Two<T>*>(dyp);
          const Two<T> wv = *reinterpret_cast<const Two<T>*>(wp);
          s[0] = settle<T>(s[0] + to_compute(gv.a) * to_compute(wv.a), round_each);
          s[1] = settle<T>(s[1] + to_compute(gv.b) * to_compute(wv.b), round_each);
        } else {
          for (I j = 0; j < m; ++j) {
            s[0] = settle<T>(s[0] + to_compute(dyp[j]) * to_compute(wp[j]), round_each);
          }
        }
      }
    }
    if constexpr (V == 2) {
      *reinterpret_cast<Two<T>*>(dx + i) = Two<T>{from_compute<T>(s[0]), from_compute<T>(s[1])};
    } else {
      dx[i] = from_compute<T>(s[0]);
    }
  }
}

// Pass 1 of the filter gradient: thread (p, e), e = (kh, kw, oc) innermost, sums
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

// Pass 2: dw[e] = the chunks' partial sums added in chunk order, in double, rounded once.
template <typename T>
__global__ void filter_finish_kernel(const compute_t<T>* __restrict__ partials, std::int64_t chunks,
                                     std::int64_t e_count, T* __restrict__ dw) {
  for (std::int64_t e = global_thread(); e < e_count; e += grid_threads()) {
    double s = 0.0;
    for (std::int64_t p = 0; p < chunks; ++p) s += static_cast<double>(partials[p * e_count + e]);
    dw[e] = from_compute<T>(static_cast<compute_t<T>>(s));
  }
}

// About this many threads in the filter gradient's first pass: a few waves on any current GPU
// (H100: 132 SMs x 2048 threads), each thread summing (N * OH / chunks) * OW products.
constexpr std::int64_t kFilterThreads = std::int64_t{1} << 18;

}  // namespace

namespace {

bool aligned4(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 3u) == 0; }

// 32-bit index arithmetic when every offset into x and y fits (with room for one grid stride).
bool fits_int32(const DepthwiseGeometry& g) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  const std::int64_t cm = g.channels * g.multiplier;
  return g.batch * g.in_h * g.in_w * cm < kLimit && g.batch * g.out_h * g.out_w * cm < kLimit &&
         g.kernel_h * g.kernel_w * cm < kLimit;
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
    const auto go = [&]<typename I, int V>() {
      forward_kernel<T, I, V><<<blocks_for(total / V), kThreads, 0, s>>>(
          g, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
          static_cast<T*>(y), round_each);
    };
    if constexpr (sizeof(T) == 2) {
      if (pairs) {
        i32 ? go.template operator()<std::int32_t, 2>() : go.template operator()<std::int64_t, 2>();
        return;
      }
    }
    i32 ? go.template operator()<std::int32_t, 1>() : go.template operator()<std::int64_t, 1>();
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
    const auto go = [&]<typename I, int V>() {
      backward_data_kernel<T, I, V><<<blocks_for(total / V), kThreads, 0, s>>>(
          g, static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), round_each);
    };
    if constexpr (sizeof(T) == 2) {
      if (pairs) {
        i32 ? go.template operator()<std::int32_t, 2>() : go.template operator()<std::int64_t, 2>();
        return;
      }
    }
    i32 ? go.template operator()<std::int32_t, 1>() : go.template operator()<std::int64_t, 1>();
  });
  check_launch("depthwise_conv2d backward data");
}

std::int64_t depthwise_filter_chunks(const DepthwiseGeometry& g, Accumulation sum) {
  // Rounding every partial sum fixes the summation order: one chunk (slow, as 16-bit
  // accumulation is only a numerics experiment).
  if (sum == Accumulation::compute_dtype) return 1;
  const std::int64_t e_count = g.kernel_h * g.kernel_w * g.channels * g.multiplier;
  const std::int64_t rows = g.batch * g.out_h;
  std::int64_t chunks = (kFilterThreads + e_count - 1) / e_count;
  if (chunks > rows) chunks = rows;
  return chunks < 1 ? 1 : chunks;
}

void depthwise_backward_filters(DType dtype, const DepthwiseGeometry& g, const void* x,
                                const void* dy, void* partials, void* dw, Accumulation sum,
                                cudaStream_t s) {
  const std::int64_t chunks = depthwise_filter_chunks(g, sum);
  const std::int64_t e_count = g.kernel_h * g.kernel_w * g.channels * g.multiplier;
  dispatch_floating(dtype, "depthwise_conv2d", [&]<typename T>() {
    auto* part = static_cast<compute_t<T>*>(partials);
    filter_partials_kernel<T><<<blocks_for(chunks * e_count), kThreads, 0, s>>>(
        g, static_cast<const T*>(x), static_cast<const T*>(dy), part, chunks,
        sum == Accumulation::compute_dtype);
    check_launch("depthwise_conv2d backward filter (partials)");
    filter_finish_kernel<T>
        <<<blocks_for(e_count), kThreads, 0, s>>>(part, chunks, e_count, static_cast<T*>(dw));
  });
  check_launch("depthwise_conv2d backward filter");
}

}  // namespace mixprec::cuda::kernels
