// Depthwise 2-D convolution on CUDA with own kernels (kernels/depthwise.cu): cuDNN's generic
// grouped convolution serves groups == channels poorly, and depthwise layers dominate EfficientNet.
// x (N, H, W, C), Keras depthwise filters (KH, KW, C, M) (equivalently the grouped HWIO view
// (KH, KW, 1, C * M): the same memory), y (N, OH, OW, C * M); output channel oc = c * M + m reads
// input channel c = oc / M. Geometry and padding as ConvGeometry with groups = C.
//
// Every kernel is channel-innermost: consecutive threads handle consecutive (output) channels of
// one pixel, so their loads of x, dy and the filters are coalesced; with 16-bit storage the forward
// and input-gradient kernels give each thread two adjacent channels (4-byte loads and stores) when
// the channel counts and pointers allow. Sums are in float (double for float64), rounded once on
// store; with Accumulation::compute_dtype on 16-bit data every partial sum is rounded to the
// storage type in the CPU reference's order (conv_reference.h, Accumulation::compute_dtype).
// The filter gradient is deterministic: per-chunk partial sums over the (N, OH) rows, then a second
// kernel adds the chunks in a fixed order (no float atomics).
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "core/window_geometry.h"
#include "mixprec/dtype.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// x, filters, bias (C * M) or undefined: one floating dtype on one CUDA device; shapes per the
// grouped geometry g (groups == in_channels, in_per_group() == 1). New contiguous results; the
// filter gradient has the grouped HWIO shape (KH, KW, 1, C * M).
Tensor depthwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const ConvGeometry& g, Accumulation accumulation);
Tensor depthwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g,
                               Accumulation accumulation);
Tensor depthwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                                  Accumulation accumulation);

// The kernel launchers (kernels/*.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// Plain geometry for the kernels (all extents >= 1 when launched).
struct DepthwiseGeometry {
  std::int64_t batch = 0, in_h = 0, in_w = 0, channels = 0, multiplier = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  std::int64_t dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
  std::int64_t out_h = 0, out_w = 0;
};

// `sum`: Accumulation::float32 sums in float (double for float64); Accumulation::compute_dtype
// rounds every partial sum to the dtype (the host side passes it for 16-bit data only).

// y = x * w (+ bias when not null), rounded once (the bias added before the rounding).
void depthwise_forward(DType dtype, const DepthwiseGeometry& g, const void* x, const void* w,
                       const void* bias, void* y, Accumulation sum, cudaStream_t s);
void depthwise_backward_data(DType dtype, const DepthwiseGeometry& g, const void* dy, const void* w,
                             void* dx, Accumulation sum, cudaStream_t s);
// The number of row chunks of the filter gradient's first pass; `partials` must hold
// chunks * KH * KW * C * M values of the compute type (float; double for float64).
std::int64_t depthwise_filter_chunks(const DepthwiseGeometry& g, Accumulation sum);
void depthwise_backward_filters(DType dtype, const DepthwiseGeometry& g, const void* x,
                                const void* dy, void* partials, void* dw, Accumulation sum,
                                cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
