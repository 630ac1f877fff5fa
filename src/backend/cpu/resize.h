// CPU spatial image kernels: zero padding (zero_pad2d) and bilinear resize of the spatial axes of
// NHWC images, forward and backward, with half-pixel centers and no antialiasing (tf.image.resize
// bilinear, PyTorch interpolate(mode="bilinear", align_corners=False)). Along each axis, output
// index o reads the input at
//   s = (o + 0.5) * in / out - 0.5, clamped to [0, in - 1],
// interpolating between floor(s) and floor(s) + 1 (the last index repeats at the border). The
// weights are computed in float64 once per call and applied in float32 (float64 for float64).
#pragma once

#include <cstdint>

#include "mixprec/nn_ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// x (N, H, W, C), CPU, any dtype and strides -> (N, top + H + bottom, left + W + right, C),
// contiguous, with x at rows [top, top + H) and columns [left, left + W) and zeros elsewhere: a
// byte copy of whole input rows.
Tensor zero_pad2d(const Tensor& x, const Padding2d& padding);

// x (N, H, W, C), CPU, floating, any strides, H and W >= 1 -> (N, height, width, C), contiguous,
// x's dtype (16-bit values rounded once). height, width >= 1.
Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width);

// The adjoint: dy (N, height, width, C) -> dx (N, in_height, in_width, C) in dy's dtype; each
// output gradient is scattered to the (up to four) inputs it was interpolated from, with the same
// weights. Accumulated in float32 (float64 for float64), rounded once.
Tensor resize_bilinear_backward(const Tensor& dy, std::int64_t in_height, std::int64_t in_width);

}  // namespace mixprec::cpu
