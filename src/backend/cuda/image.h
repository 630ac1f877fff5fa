// Spatial image ops on CUDA, NHWC (mirrors cpu/resize.h):
// zero padding (a fill and a strided copy: no kernel of its own) and bilinear resizing with
// half-pixel centers (kernels/image.cu), forward and backward, with the CPU's taps and formulas:
// along each axis output o reads s = max((o + 0.5) * in / out - 0.5, 0), i0 = min(floor(s),
// in - 1), i1 = min(i0 + 1, in - 1), w = s - i0 (0 when i0 == i1), value = a + w * (b - a)
// (exactly a when w == 0), horizontally first, then vertically; computed in float (double for
// float64), rounded once.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>
#include <vector>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// x (N, H, W, C) of any dtype on a CUDA device -> (N, top + H + bottom, left + W + right, C).
Tensor zero_pad2d(const Tensor& x, std::int64_t top, std::int64_t bottom, std::int64_t left,
                  std::int64_t right);

// x (N, H, W, C) floating, H, W, height, width >= 1 -> (N, height, width, C), contiguous.
Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width);
// The adjoint: dy (N, height, width, C) -> dx (N, in_height, in_width, C), deterministic: each
// input element gathers the gradients that read it (vertically into a float buffer
// (N, in_height, width, C), then horizontally), in increasing output order, as the CPU adds them.
Tensor resize_bilinear_backward(const Tensor& dy, std::int64_t in_height, std::int64_t in_width);

// ---- the host-side tables of the resize, exposed for tests/unit/cuda_conv_plan_test.cpp ----
namespace detail {

// Output o along an axis of `in` -> `out` elements reads i0 and i1 with weight w, the weight in
// the compute type (float; double for float64) held exactly in a double.
struct ResizeTap {
  std::int64_t i0 = 0, i1 = 0;
  double w = 0;
};
std::vector<ResizeTap> resize_taps(std::int64_t in, std::int64_t out, DType dtype);

// The adjoint of one axis as CSR: input index i is read by outputs source[k] with weight
// weight[k] for k in [first[i], first[i + 1]), in increasing output order (the CPU's order):
// 1 - w (computed in the compute type) for i0, and w for i1 when w != 0.
struct ResizeSources {
  std::vector<std::int64_t> first, source;
  std::vector<double> weight;
};
ResizeSources resize_sources(const std::vector<ResizeTap>& taps, std::int64_t in, DType dtype);

}  // namespace detail

// The kernel launchers (kernels/*.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// y (n, oh, ow, c) from x (n, h, w, c); taps per axis: index pairs (i0, i1) at 2 o, 2 o + 1 and
// weights w[o] (the float weight, held exactly in a double).
void resize_bilinear_forward(DType dtype, std::int64_t n, std::int64_t h, std::int64_t w,
                             std::int64_t c, std::int64_t oh, std::int64_t ow,
                             const std::int64_t* rows, const double* row_weights,
                             const std::int64_t* cols, const double* col_weights, const void* x,
                             void* y, cudaStream_t s);

// out (outer, out_len, inner) = for each j: sum over k in [first[j], first[j + 1]) of
// weight[k] * in (outer, in_len, inner)[:, source[k], :], in k order, in the compute type.
// `from_storage`: in has `dtype` and out the compute type (float; double for float64); otherwise
// in has the compute type and out `dtype` (rounded once).
enum class GatherTypes { from_storage, to_storage };
void resize_gather(DType dtype, GatherTypes types, std::int64_t outer, std::int64_t in_len,
                   std::int64_t out_len, std::int64_t inner, const std::int64_t* first,
                   const std::int64_t* source, const double* weight, const void* in, void* out,
                   cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
