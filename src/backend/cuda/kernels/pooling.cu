// Pooling launchers (see pooling.h; the kernels are in pooling_kernels.cuh): V = 16 bytes of
// channels per thread where the channel count and the pointers allow, 32-bit index arithmetic
// where every offset fits, and the argmax in the narrowest type that holds the window's taps.
#include <algorithm>
#include <initializer_list>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/pooling.h"
// After common.cuh and pooling.h, whose names the kernels use.
#include "backend/cuda/kernels/pooling_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using pooling_kernels::backward_kernel;
using pooling_kernels::forward_kernel;

// Room for one grid stride past the end: a 32-bit index never overflows.
bool fits_int32(const PoolShape& g) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  return g.batch * g.in_h * g.in_w * g.channels < kLimit &&
         g.batch * g.out_h * g.out_w * g.channels < kLimit;
}

// Calls f.template operator()<I, V>(): 32-bit I with V = 16 bytes of T where the channel count
// and the pointers (null ones aside) allow, else V = 1; 64-bit I (huge tensors) always with V = 1.
template <typename T, typename F>
void with_index_and_vector(const PoolShape& g, std::initializer_list<const void*> pointers, F&& f) {
  constexpr int kVector = static_cast<int>(16 / sizeof(T));
  if (!fits_int32(g)) return f.template operator()<std::int64_t, 1>();
  const bool aligned = std::all_of(pointers.begin(), pointers.end(),
                                   [](const void* p) { return p == nullptr || aligned16(p); });
  if (g.channels % kVector == 0 && aligned) return f.template operator()<std::int32_t, kVector>();
  f.template operator()<std::int32_t, 1>();
}

// Calls f.template operator()<A>() with A the argmax entry type of the window (pooling.h).
template <typename F>
void with_argmax_type(const PoolShape& g, F&& f) {
  if (pool_argmax_dtype(g.window_h, g.window_w) == DType::uint8) {
    f.template operator()<std::uint8_t>();
  } else {
    f.template operator()<std::int32_t>();
  }
}

}  // namespace

void pool2d_forward(bool max, DType dtype, const PoolShape& g, const void* x, void* y, void* argmax,
                    cudaStream_t s) {
  dispatch_floating(dtype, max ? "max_pool2d" : "avg_pool2d", [&]<typename T>() {
    with_argmax_type(g, [&]<typename A>() {
      with_index_and_vector<T>(g, {x, y, argmax}, [&]<typename I, int V>() {
        const std::int64_t items = g.batch * g.out_h * g.out_w * (g.channels / V);
        forward_kernel<T, I, A, V><<<blocks_for(items), kThreads, 0, s>>>(
            max, g, static_cast<const T*>(x), static_cast<T*>(y), static_cast<A*>(argmax));
      });
    });
  });
  check_launch("pool2d forward");
}

void pool2d_backward(bool max, DType dtype, const PoolShape& g, const void* dy, const void* argmax,
                     void* dx, cudaStream_t s) {
  dispatch_floating(dtype, max ? "max_pool2d" : "avg_pool2d", [&]<typename T>() {
    with_argmax_type(g, [&]<typename A>() {
      with_index_and_vector<T>(g, {dy, argmax, dx}, [&]<typename I, int V>() {
        const std::int64_t items = g.batch * g.in_h * g.in_w * (g.channels / V);
        backward_kernel<T, I, A, V><<<blocks_for(items), kThreads, 0, s>>>(
            max, g, static_cast<const T*>(dy), static_cast<const A*>(argmax), static_cast<T*>(dx));
      });
    });
  });
  check_launch("pool2d backward");
}

}  // namespace mixprec::cuda::kernels
