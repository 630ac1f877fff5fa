// The CPU kernel of a depthwise convolution's backward filters (groups == in_channels ==
// out_channels, NHWC), used by cpu::conv2d_backward_filters instead of oneDNN, whose jit
// depthwise kernel covers only some geometries and whose generic fallbacks are slow.
#pragma once

#include "core/window_geometry.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Whether depthwise_backward_filters handles g: one filter per channel (groups == in_channels ==
// out_channels, at least one channel).
bool is_depthwise_geometry(const ConvGeometry& g);

// dfilters (kernel_h, kernel_w, 1, C) with dfilters[kh, kw, 0, c] = sum over n, oh, ow of
// x[n, oh * stride_h - pad_top + kh * dilation_h, ow * stride_w - pad_left + kw * dilation_w, c] *
// dy[n, oh, ow, c] (positions outside x are zero). x and dy are contiguous CPU tensors of one
// dtype (float32, float16 or bfloat16), checked by the caller. The sum runs in float32 over fixed
// blocks of (n, oh) rows, summed in block order, so the result does not depend on the thread
// count; a 16-bit result is the float32 sum rounded once.
Tensor depthwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

}  // namespace mixprec::cpu
