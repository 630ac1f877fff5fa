// 2-D max and average pooling on CUDA, NHWC (mirrors cpu/pooling.h), with own kernels
// (kernels/pooling.cu): the semantics are the CPU op's exactly, which cuDNN's pooling does not
// promise (which of equal maxima takes the gradient). Window (oh, ow) covers rows
// oh * stride_h - pad_top + [0, window_h) and likewise columns; padding never wins a max and is not
// counted by an average (Keras / TensorFlow). Max pooling records the first maximum of each window
// in row-major window order (kh * window_w + kw, int32) for the backward, which gathers: each input
// element sums the output gradients of the windows that chose it (average: dy / count of each
// window containing it), in float, rounded once; no atomics.
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

// PoolKind (core/op_kinds.h), SaveForBackward and PoolForward (backend/nn_kernels.h): max
// pooling with SaveForBackward::yes keeps the int32 argmax (batch, out_h, out_w, channels) in
// saved.argmax.
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

// x, y, dy, dx contiguous; argmax may be null in the forward (not saved).
void pool2d_forward(bool max, DType dtype, const PoolShape& g, const void* x, void* y,
                    std::int32_t* argmax, cudaStream_t s);
void pool2d_backward(bool max, DType dtype, const PoolShape& g, const void* dy,
                     const std::int32_t* argmax, void* dx, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
