// Pooling kernels (see pooling.h): one thread per output element in the forward and per input
// element in the backward, the channel innermost (coalesced), float accumulation (double for
// float64), one rounding on store.
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/pooling.h"

namespace mixprec::cuda::kernels {

namespace {

// Real (unpadded) rows of window o along one axis: [max(start, 0), min(start + window, in)).
template <typename I>
__device__ __forceinline__ I real_count(I o, I stride, I pad, I window, I in) {
  const I start = o * stride - pad;
  const I lo = start > 0 ? start : 0;
  const I hi = start + window < in ? start + window : in;
  return hi - lo;
}

// The geometry in the index type I (32-bit when every offset fits: cheaper division).
template <typename I>
struct Geometry {
  I batch, in_h, in_w, channels, window_h, window_w, stride_h, stride_w, pad_top, pad_left, out_h,
      out_w;
  __device__ explicit Geometry(const PoolShape& g)
      : batch(static_cast<I>(g.batch)),
        in_h(static_cast<I>(g.in_h)),
        in_w(static_cast<I>(g.in_w)),
        channels(static_cast<I>(g.channels)),
        window_h(static_cast<I>(g.window_h)),
        window_w(static_cast<I>(g.window_w)),
        stride_h(static_cast<I>(g.stride_h)),
        stride_w(static_cast<I>(g.stride_w)),
        pad_top(static_cast<I>(g.pad_top)),
        pad_left(static_cast<I>(g.pad_left)),
        out_h(static_cast<I>(g.out_h)),
        out_w(static_cast<I>(g.out_w)) {}
};

template <typename T, typename I>
__global__ void forward_kernel(bool max, PoolShape shape, const T* __restrict__ x,
                               T* __restrict__ y, std::int32_t* __restrict__ argmax) {
  using C = compute_t<T>;
  const Geometry<I> g(shape);
  const I total = g.batch * g.out_h * g.out_w * g.channels;
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % g.channels;
    I t = i / g.channels;
    const I ow = t % g.out_w;
    t /= g.out_w;
    const I oh = t % g.out_h, n = t / g.out_h;
    C acc = C(0);
    int best = -1;
    for (I kh = 0; kh < g.window_h; ++kh) {
      const I ih = oh * g.stride_h - g.pad_top + kh;
      if (ih < 0 || ih >= g.in_h) continue;
      for (I kw = 0; kw < g.window_w; ++kw) {
        const I iw = ow * g.stride_w - g.pad_left + kw;
        if (iw < 0 || iw >= g.in_w) continue;
        const C v = to_compute(x[((n * g.in_h + ih) * g.in_w + iw) * g.channels + c]);
        if (max) {
          // The first maximum wins: a later equal value does not replace it.
          if (best < 0 || v > acc) acc = v, best = static_cast<int>(kh * g.window_w + kw);
        } else {
          acc += v;
        }
      }
    }
    if (!max) {
      const I count = real_count(oh, g.stride_h, g.pad_top, g.window_h, g.in_h) *
                      real_count(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
      acc = acc / static_cast<C>(count);
    } else if (argmax != nullptr) {
      argmax[i] = best;
    }
    y[i] = from_compute<T>(acc);
  }
}

template <typename T, typename I>
__global__ void backward_kernel(bool max, PoolShape shape, const T* __restrict__ dy,
                                const std::int32_t* __restrict__ argmax, T* __restrict__ dx) {
  using C = compute_t<T>;
  const Geometry<I> g(shape);
  const I total = g.batch * g.in_h * g.in_w * g.channels;
  for (I i = static_cast<I>(global_thread()); i < total; i += static_cast<I>(grid_threads())) {
    const I c = i % g.channels;
    I t = i / g.channels;
    const I iw = t % g.in_w;
    t /= g.in_w;
    const I ih = t % g.in_h, n = t / g.in_h;
    C s = C(0);
    for (I kh = 0; kh < g.window_h; ++kh) {
      const I th = ih + g.pad_top - kh;  // oh * stride_h when window oh has row ih at kh
      if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= g.out_h) continue;
      const I oh = th / g.stride_h;
      for (I kw = 0; kw < g.window_w; ++kw) {
        const I tw = iw + g.pad_left - kw;
        if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= g.out_w) continue;
        const I ow = tw / g.stride_w;
        const I o = ((n * g.out_h + oh) * g.out_w + ow) * g.channels + c;
        if (max) {
          if (argmax[o] == static_cast<std::int32_t>(kh * g.window_w + kw)) s += to_compute(dy[o]);
        } else {
          const I count = real_count(oh, g.stride_h, g.pad_top, g.window_h, g.in_h) *
                          real_count(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
          s += to_compute(dy[o]) / static_cast<C>(count);
        }
      }
    }
    dx[i] = from_compute<T>(s);
  }
}

// Room for one grid stride past the end: a 32-bit index never overflows.
bool fits_int32(const PoolShape& g) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  return g.batch * g.in_h * g.in_w * g.channels < kLimit &&
         g.batch * g.out_h * g.out_w * g.channels < kLimit;
}

}  // namespace

void pool2d_forward(bool max, DType dtype, const PoolShape& g, const void* x, void* y,
                    std::int32_t* argmax, cudaStream_t s) {
  const std::int64_t total = g.batch * g.out_h * g.out_w * g.channels;
  dispatch_floating(dtype, max ? "max_pool2d" : "avg_pool2d", [&]<typename T>() {
    const auto go = [&]<typename I>() {
      forward_kernel<T, I><<<blocks_for(total), kThreads, 0, s>>>(max, g, static_cast<const T*>(x),
                                                                  static_cast<T*>(y), argmax);
    };
    fits_int32(g) ? go.template operator()<std::int32_t>() : go.template operator()<std::int64_t>();
  });
  check_launch("pool2d forward");
}

void pool2d_backward(bool max, DType dtype, const PoolShape& g, const void* dy,
                     const std::int32_t* argmax, void* dx, cudaStream_t s) {
  const std::int64_t total = g.batch * g.in_h * g.in_w * g.channels;
  dispatch_floating(dtype, max ? "max_pool2d" : "avg_pool2d", [&]<typename T>() {
    const auto go = [&]<typename I>() {
      backward_kernel<T, I><<<blocks_for(total), kThreads, 0, s>>>(
          max, g, static_cast<const T*>(dy), argmax, static_cast<T*>(dx));
    };
    fits_int32(g) ? go.template operator()<std::int32_t>() : go.template operator()<std::int64_t>();
  });
  check_launch("pool2d backward");
}

}  // namespace mixprec::cuda::kernels
