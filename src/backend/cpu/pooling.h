// CPU 2-D max and average pooling, NHWC: oneDNN forward and backward for float32 and the 16-bit
// dtypes, plain loops for float64 and as the test oracle.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

enum class PoolKind { max, average };

// x (batch, in_h, in_w, channels) -> y (batch, out_h, out_w, channels). Window (oh, ow) covers
// rows oh * stride_h - pad_top + [0, window_h) and likewise columns; positions outside the input
// are padding, which never wins a max and is not counted by an average (Keras/TensorFlow:
// oneDNN's pooling_avg_exclude_padding). pad_bottom/pad_right complete the padded extent.
struct PoolGeometry {
  std::int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  std::int64_t window_h = 1, window_w = 1, stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::int64_t out_h = 0, out_w = 0;
};

// What the backward of a pooling needs besides dy. Max pooling on oneDNN keeps oneDNN's workspace
// (where each window's maximum was), and the data type it ran in, because the backward must use
// the matching primitive; the float64 path keeps x and finds the maxima again.
struct PoolState {
  Tensor workspace;          // uint8 bytes, oneDNN's layout; max pooling on oneDNN only
  Tensor x;                  // float64 max pooling only
  bool native_bf16 = false;  // the forward ran the bf16 primitive (not the float32 one)
};

enum class SaveForBackward { no, yes };

struct PoolForward {
  Tensor y;
  PoolState state;  // empty unless SaveForBackward::yes
};

// x contiguous, of dtype float32/float16/bfloat16 (oneDNN) or float64 (the loops). float16, and
// bfloat16 without native support or with the fallback forced (use_native_bf16()), run in float32
// on exactly widened copies and are rounded once. The maximum of each window is the first one in
// row-major window order (the gradient goes there).
PoolForward pool2d_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                           SaveForBackward save);
// dx (batch, in_h, in_w, channels) from dy (batch, out_h, out_w, channels) of x's dtype; `state`
// is what pool2d_forward saved. Gradients of overlapping windows add up (in float32 for 16-bit
// dtypes, rounded once).
Tensor pool2d_backward(PoolKind kind, const Tensor& dy, const PoolState& state,
                       const PoolGeometry& g);

// The oracle: plain loops on any floating dtype and strides, float64 arithmetic, one rounding to
// the dtype. Max sends the gradient to the first maximum of each window.
Tensor pool2d_reference_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g);
Tensor pool2d_reference_backward(PoolKind kind, const Tensor& dy, const Tensor& x,
                                 const PoolGeometry& g);

PrimitiveCacheStats pooling_cache_stats();
void clear_pooling_cache();

}  // namespace mixprec::cpu
