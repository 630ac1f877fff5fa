// The CPU kernels of a depthwise convolution's forward and backward-data passes (groups ==
// in_channels == out_channels, NHWC, Keras filters (KH, KW, 1, C)), used by cpu::conv2d_forward and
// cpu::conv2d_backward_data instead of oneDNN where they are faster (depthwise_*_path).
#pragma once

#include <optional>

#include "core/window_geometry.h"
#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// y[n, oh, ow, c] = sum over (kh, kw) of x[n, oh * stride_h - pad_top + kh * dilation_h,
// ow * stride_w - pad_left + kw * dilation_w, c] * filters[kh, kw, 0, c] (+ bias32[c]), taps that
// read padding skipped (never multiplied by zero). x and filters are contiguous CPU tensors of one
// dtype (float32, float16 or bfloat16) and g a depthwise geometry (is_depthwise_geometry), checked
// by the caller; bias32 is undefined or the float32 bias. Sums run in float32 in the order (kh,
// kw), the bias is added to the finished sum and a 16-bit result is rounded once. Every output
// element is computed by one thread in a fixed order: the result does not depend on the thread
// count.
Tensor depthwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                         const ConvGeometry& g);

// dx[n, ih, iw, c] = sum over the (kh, kw) whose output position (oh, ow) reads (ih, iw) of
// dy[n, oh, ow, c] * filters[kh, kw, 0, c], in the order (kh, kw); contract as depthwise_forward.
// Every dx element is written once, by the thread that owns its row.
Tensor depthwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g);

// Whether cpu::conv2d_forward / conv2d_backward_data take these kernels for g and dtype: the
// switch below is on, g is depthwise and the kernel was measured faster than oneDNN's there.
bool depthwise_forward_path(const ConvGeometry& g, DType dtype);
bool depthwise_backward_data_path(const ConvGeometry& g, DType dtype);

// The switch: set_depthwise_conv's value if one was set, else the environment
// (MIXPREC_DEPTHWISE=0 sends depthwise forward and backward data to oneDNN; for A/B measurements
// and tests comparing the two). Thread-safe. nullopt hands it back to the environment.
bool depthwise_conv_enabled();
void set_depthwise_conv(std::optional<bool> enabled);

}  // namespace mixprec::cpu
