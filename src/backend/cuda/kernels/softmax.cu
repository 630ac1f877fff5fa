// softmax and log_softmax over one axis of a contiguous (outer, length, inner) tensor, forward and
// backward, computed in float (double for float64) with the max subtracted, with the CPU backend's
// formulas (src/backend/cpu/softmax.cpp):
//   softmax:     y = exp(x - m) / s,      dx = y (g - sum(g y))
//   log_softmax: y = (x - m) - log(s),   dx = g - exp(y) sum(g)      with s = sum(exp(x - m)).
// The axis last (inner == 1, the logits case): one warp per row, lanes reading consecutive
// elements. Otherwise one thread per (outer, inner) line; neighbouring threads read neighbouring
// columns, so reads coalesce. Each pass re-reads its row from global memory (L1/L2-resident for
// typical class counts).
#include <cmath>

#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

__device__ __forceinline__ float k_exp(float x) { return expf(x); }
__device__ __forceinline__ double k_exp(double x) { return exp(x); }
__device__ __forceinline__ float k_log(float x) { return logf(x); }
__device__ __forceinline__ double k_log(double x) { return log(x); }

template <typename C>
__device__ __forceinline__ C warp_sum(C v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The max that ignores NaN (a NaN reaches the output through the sum instead, as on the CPU).
template <typename C>
__device__ __forceinline__ C warp_max(C v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const C o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

constexpr int kWarpsPerBlock = kThreads / 32;

template <typename T>
__global__ void forward_rows(SoftmaxKind kind, const T* __restrict__ x, std::int64_t rows,
                             std::int64_t length, T* __restrict__ y) {
  using C = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t first =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t row = first; row < rows; row += step) {
    const T* in = x + row * length;
    T* out = y + row * length;
    C m = -INFINITY;
    for (std::int64_t i = lane; i < length; i += 32) {
      const C v = to_compute(in[i]);
      m = v > m ? v : m;
    }
    m = warp_max(m);
    C s = 0;
    for (std::int64_t i = lane; i < length; i += 32) s += k_exp(to_compute(in[i]) - m);
    s = warp_sum(s);
    if (kind == SoftmaxKind::softmax) {
      for (std::int64_t i = lane; i < length; i += 32)
        out[i] = from_compute<T>(k_exp(to_compute(in[i]) - m) / s);
    } else {
      // (x - m) - log(s), not x - (m + log(s)): x - m is exact near the max (see cpu/softmax.cpp).
      const C log_s = k_log(s);
      for (std::int64_t i = lane; i < length; i += 32)
        out[i] = from_compute<T>((to_compute(in[i]) - m) - log_s);
    }
  }
}

template <typename T>
__global__ void forward_lines(SoftmaxKind kind, const T* __restrict__ x, std::int64_t outer,
                              std::int64_t length, std::int64_t inner, T* __restrict__ y) {
  using C = compute_t<T>;
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = global_thread(); line < lines; line += grid_threads()) {
    const std::int64_t o = line / inner, c = line % inner;
    const T* in = x + o * length * inner + c;
    T* out = y + o * length * inner + c;
    C m = -INFINITY;
    for (std::int64_t l = 0; l < length; ++l) {
      const C v = to_compute(in[l * inner]);
      m = v > m ? v : m;
    }
    C s = 0;
    for (std::int64_t l = 0; l < length; ++l) s += k_exp(to_compute(in[l * inner]) - m);
    if (kind == SoftmaxKind::softmax) {
      for (std::int64_t l = 0; l < length; ++l)
        out[l * inner] = from_compute<T>(k_exp(to_compute(in[l * inner]) - m) / s);
    } else {
      const C log_s = k_log(s);
      for (std::int64_t l = 0; l < length; ++l)
        out[l * inner] = from_compute<T>((to_compute(in[l * inner]) - m) - log_s);
    }
  }
}

template <typename T>
__global__ void backward_rows(SoftmaxKind kind, const T* __restrict__ g, const T* __restrict__ y,
                              std::int64_t rows, std::int64_t length, T* __restrict__ dx) {
  using C = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t first =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  const bool is_softmax = kind == SoftmaxKind::softmax;
  for (std::int64_t row = first; row < rows; row += step) {
    const T* gr = g + row * length;
    const T* yr = y + row * length;
    T* out = dx + row * length;
    C s = 0;
    for (std::int64_t i = lane; i < length; i += 32)
      s += is_softmax ? to_compute(gr[i]) * to_compute(yr[i]) : to_compute(gr[i]);
    s = warp_sum(s);
    for (std::int64_t i = lane; i < length; i += 32) {
      const C gv = to_compute(gr[i]), yv = to_compute(yr[i]);
      out[i] = from_compute<T>(is_softmax ? yv * (gv - s) : gv - k_exp(yv) * s);
    }
  }
}

template <typename T>
__global__ void backward_lines(SoftmaxKind kind, const T* __restrict__ g, const T* __restrict__ y,
                               std::int64_t outer, std::int64_t length, std::int64_t inner,
                               T* __restrict__ dx) {
  using C = compute_t<T>;
  const std::int64_t lines = outer * inner;
  const bool is_softmax = kind == SoftmaxKind::softmax;
  for (std::int64_t line = global_thread(); line < lines; line += grid_threads()) {
    const std::int64_t o = line / inner, c = line % inner;
    const std::int64_t base = o * length * inner + c;
    C s = 0;
    for (std::int64_t l = 0; l < length; ++l) {
      const C gv = to_compute(g[base + l * inner]);
      s += is_softmax ? gv * to_compute(y[base + l * inner]) : gv;
    }
    for (std::int64_t l = 0; l < length; ++l) {
      const C gv = to_compute(g[base + l * inner]), yv = to_compute(y[base + l * inner]);
      dx[base + l * inner] = from_compute<T>(is_softmax ? yv * (gv - s) : gv - k_exp(yv) * s);
    }
  }
}

unsigned row_blocks(std::int64_t rows) {
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

}  // namespace

void softmax_forward(SoftmaxKind kind, DType dtype, const void* x, std::int64_t outer,
                     std::int64_t length, std::int64_t inner, void* y, cudaStream_t s) {
  dispatch_floating(dtype, "softmax", [&]<typename T>() {
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (inner == 1) {
      forward_rows<T><<<row_blocks(outer), kThreads, 0, s>>>(kind, xp, outer, length, yp);
    } else {
      forward_lines<T>
          <<<blocks_for(outer * inner), kThreads, 0, s>>>(kind, xp, outer, length, inner, yp);
    }
  });
  check_launch("softmax_forward");
}

void softmax_backward(SoftmaxKind kind, DType dtype, const void* g, const void* y,
                      std::int64_t outer, std::int64_t length, std::int64_t inner, void* dx,
                      cudaStream_t s) {
  dispatch_floating(dtype, "softmax backward", [&]<typename T>() {
    const T* gp = static_cast<const T*>(g);
    const T* yp = static_cast<const T*>(y);
    T* dp = static_cast<T*>(dx);
    if (inner == 1) {
      backward_rows<T><<<row_blocks(outer), kThreads, 0, s>>>(kind, gp, yp, outer, length, dp);
    } else {
      backward_lines<T>
          <<<blocks_for(outer * inner), kThreads, 0, s>>>(kind, gp, yp, outer, length, inner, dp);
    }
  });
  check_launch("softmax_backward");
}

}  // namespace mixprec::cuda::kernels
