// CPU 2-D convolution on oneDNN, NHWC: forward, backward data and backward weights (filters).
// The op layer (src/ops/conv.cpp) validates and builds the geometry; float64 and 16-bit
// accumulation go to the plain loops of conv_reference.h instead.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Everything oneDNN (and the reference loops) need to know about one convolution, in elements.
// x (batch, in_h, in_w, in_channels), filters (kernel_h, kernel_w, in_channels / groups,
// out_channels) in Keras's HWIO order, y (batch, out_h, out_w, out_channels). Output channel o
// belongs to group o / (out_channels / groups) and reads the input channels of that group.
// Input row ih = oh * stride_h - pad_top + kh * dilation_h (likewise for columns); rows outside
// [0, in_h) are the implicit zero padding. pad_bottom/pad_right complete the padded extent as
// oneDNN wants it (TensorFlow's `same` puts the odd row/column there).
struct ConvGeometry {
  std::int64_t batch = 0, in_h = 0, in_w = 0, in_channels = 0;
  std::int64_t kernel_h = 0, kernel_w = 0, out_channels = 0, groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::int64_t out_h = 0, out_w = 0;

  std::int64_t in_per_group() const { return in_channels / groups; }
  std::int64_t out_per_group() const { return out_channels / groups; }
};

// All tensors are contiguous, on the CPU, of one dtype: float32, float16 or bfloat16.
// float32 runs the float32 primitive. bfloat16 runs the native bf16 primitive when
// use_native_bf16() (float32 accumulation inside oneDNN, one rounding on store); float16, and
// bfloat16 otherwise, are widened exactly to float32, computed in float32 and rounded once (oneDNN
// 2.6 has no float16 convolution on CPU). Either way the 16-bit result is the float32 result of
// the stored 16-bit values rounded once, up to float32 summation order.

// y (batch, out_h, out_w, out_channels) = x * filters (+ bias (out_channels) when defined).
Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g);
// dx (batch, in_h, in_w, in_channels) from dy (batch, out_h, out_w, out_channels).
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g);
// dfilters (kernel_h, kernel_w, in_channels / groups, out_channels) from x and dy, summed over
// the batch and the output positions.
Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

// The conv primitives (all three passes) are cached by geometry, data type and bias, least
// recently used first out beyond the capacity. Thread-safe.
PrimitiveCacheStats conv_cache_stats();
void clear_conv_cache();

}  // namespace mixprec::cpu
