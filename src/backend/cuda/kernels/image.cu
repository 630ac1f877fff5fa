// Bilinear resize kernels (see image.h): one thread per output element, channel innermost
// (coalesced), the CPU's formulas in the compute type.
#include "backend/cuda/image.h"
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

template <typename T>
__global__ void resize_forward_kernel(std::int64_t n, std::int64_t h, std::int64_t w,
                                      std::int64_t c, std::int64_t oh, std::int64_t ow,
                                      const std::int64_t* __restrict__ rows,
                                      const double* __restrict__ row_weights,
                                      const std::int64_t* __restrict__ cols,
                                      const double* __restrict__ col_weights,
                                      const T* __restrict__ x, T* __restrict__ y) {
  using C = compute_t<T>;
  const std::int64_t total = n * oh * ow * c;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t ch = i % c;
    std::int64_t t = i / c;
    const std::int64_t ox = t % ow;
    t /= ow;
    const std::int64_t oy = t % oh, image = t / oh;
    const std::int64_t x0 = cols[2 * ox], x1 = cols[2 * ox + 1];
    const C wx = static_cast<C>(col_weights[ox]), wy = static_cast<C>(row_weights[oy]);
    // Horizontal interpolation of input row r at this output column (exactly a when wx == 0).
    const auto along_row = [&](std::int64_t r) {
      const T* row = x + ((image * h + r) * w) * c + ch;
      const C a = to_compute(row[x0 * c]);
      if (wx == C(0)) return a;
      const C b = to_compute(row[x1 * c]);
      return a + wx * (b - a);
    };
    const C top = along_row(rows[2 * oy]);
    C v = top;
    if (wy != C(0)) {
      const C bottom = along_row(rows[2 * oy + 1]);
      v = top + wy * (bottom - top);
    }
    y[i] = from_compute<T>(v);
  }
}

template <typename In, typename Out>
__global__ void gather_kernel(std::int64_t outer, std::int64_t in_len, std::int64_t out_len,
                              std::int64_t inner, const std::int64_t* __restrict__ first,
                              const std::int64_t* __restrict__ source,
                              const double* __restrict__ weight, const In* __restrict__ in,
                              Out* __restrict__ out) {
  using C =
      std::conditional_t<std::is_same_v<In, double> || std::is_same_v<Out, double>, double, float>;
  const std::int64_t total = outer * out_len * inner;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t e = i % inner;
    std::int64_t t = i / inner;
    const std::int64_t j = t % out_len, o = t / out_len;
    const In* base = in + o * in_len * inner + e;
    C s = C(0);
    for (std::int64_t k = first[j]; k < first[j + 1]; ++k) {
      s += static_cast<C>(weight[k]) * static_cast<C>(to_compute(base[source[k] * inner]));
    }
    if constexpr (std::is_same_v<Out, C>) {
      out[i] = s;
    } else {
      out[i] = from_compute<Out>(s);
    }
  }
}

}  // namespace

void resize_bilinear_forward(DType dtype, std::int64_t n, std::int64_t h, std::int64_t w,
                             std::int64_t c, std::int64_t oh, std::int64_t ow,
                             const std::int64_t* rows, const double* row_weights,
                             const std::int64_t* cols, const double* col_weights, const void* x,
                             void* y, cudaStream_t s) {
  const std::int64_t total = n * oh * ow * c;
  dispatch_floating(dtype, "resize_bilinear", [&]<typename T>() {
    resize_forward_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(
        n, h, w, c, oh, ow, rows, row_weights, cols, col_weights, static_cast<const T*>(x),
        static_cast<T*>(y));
  });
  check_launch("resize_bilinear forward");
}

void resize_gather(DType dtype, GatherTypes types, std::int64_t outer, std::int64_t in_len,
                   std::int64_t out_len, std::int64_t inner, const std::int64_t* first,
                   const std::int64_t* source, const double* weight, const void* in, void* out,
                   cudaStream_t s) {
  const std::int64_t total = outer * out_len * inner;
  dispatch_floating(dtype, "resize_bilinear backward", [&]<typename T>() {
    using C = compute_t<T>;
    if (types == GatherTypes::from_storage) {
      gather_kernel<T, C><<<blocks_for(total), kThreads, 0, s>>>(
          outer, in_len, out_len, inner, first, source, weight, static_cast<const T*>(in),
          static_cast<C*>(out));
    } else {
      gather_kernel<C, T><<<blocks_for(total), kThreads, 0, s>>>(
          outer, in_len, out_len, inner, first, source, weight, static_cast<const C*>(in),
          static_cast<T*>(out));
    }
  });
  check_launch("resize_bilinear backward");
}

}  // namespace mixprec::cuda::kernels
