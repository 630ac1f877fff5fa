// 2-D max and average pooling on CUDA, NHWC (mirrors cpu/pooling.h), with own kernels
// (kernels/pooling.cu): the semantics are the CPU op's exactly, which cuDNN's pooling does not
// promise (which of equal maxima takes the gradient). Window (oh, ow) covers rows
// oh * stride_h - pad_top + [0, window_h) and likewise columns; padding never wins a max and is not
// counted by an average (Keras / TensorFlow). Max pooling records the first maximum of each window
// in row-major window order (the tap kh * window_w + kw, of dtype pool_argmax_dtype) for the
// backward, which gathers: each input element sums the output gradients of the windows that chose
// it (average: dy / count of each window containing it), windows in row-major order, in float
// (double for float64), rounded once; no atomics.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "core/op_kinds.h"
#include "core/window_geometry.h"
#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec {
// backend/nn_kernels.h (declared here so that the kernels' .cu files do not see the ops).
struct PoolForward;
enum class SaveForBackward;
}  // namespace mixprec

namespace mixprec::cuda {

// The dtype of max pooling's argmax: uint8 when the window has at most 256 taps (every window
// of real networks: a quarter of int32's memory traffic in the forward and the backward), else
// int32.
inline DType pool_argmax_dtype(std::int64_t window_h, std::int64_t window_w) {
  return window_h * window_w <= 256 ? DType::uint8 : DType::int32;
}

// PoolKind (core/op_kinds.h), SaveForBackward and PoolForward (backend/nn_kernels.h): max
// pooling with SaveForBackward::yes keeps the argmax (batch, out_h, out_w, channels), dtype
// pool_argmax_dtype, in saved.argmax.
// x floating, on a CUDA device, shape (batch, in_h, in_w, channels) of g; any strides.
PoolForward pool2d_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                           SaveForBackward save);
// dx (batch, in_h, in_w, channels) from dy (x's dtype); `argmax` from the forward (max only).
Tensor pool2d_backward(PoolKind kind, const Tensor& dy, const Tensor& argmax,
                       const PoolGeometry& g);

// The kernel launchers (kernels/*.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

struct PoolShape {
  std::int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  std::int64_t window_h = 1, window_w = 1, stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, out_h = 0, out_w = 0;
};

// x, y, dy, dx contiguous; argmax (dtype pool_argmax_dtype(g.window_h, g.window_w)) contiguous,
// may be null in the forward (not saved) and is unused by average pooling.
void pool2d_forward(bool max, DType dtype, const PoolShape& g, const void* x, void* y, void* argmax,
                    cudaStream_t s);
void pool2d_backward(bool max, DType dtype, const PoolShape& g, const void* dy, const void* argmax,
                     void* dx, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
