// Image ops of convolutional networks, all in NHWC layout (Keras channels_last):
// convolution, pooling, batch normalization, padding and resizing. Like every op in ops.h they are
// differentiable, take float32/float16/bfloat16/float64 and compute 16-bit storage in float32
// (rounded once on store). Shapes are checked at the boundary: a mismatch throws ShapeError naming
// the op and the shapes, a bad parameter (non-positive stride, a kernel larger than the padded
// input) throws ValueError.
#pragma once

#include <array>
#include <cstdint>

#include "mixprec/ops.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// Keras padding modes. `same` pads so that out = ceil(in / stride), the extra row/column going to
// the bottom/right (TensorFlow's rule); `valid` does not pad: out = floor((in - window) / stride) +
// 1 with window = dilation * (kernel - 1) + 1.
enum class Padding { valid, same };

struct Conv2dOptions {
  std::array<int, 2> strides{1, 1};  // (height, width), >= 1
  Padding padding = Padding::valid;
  std::array<int, 2> dilation{1, 1};  // (height, width), >= 1
  int groups = 1;                     // Cin and Cout both divisible by groups
  // float32 (the default) or, for 16-bit inputs, the compute dtype itself (DESIGN §2.4 switch 0).
  Accumulation accumulation = Accumulation::float32;
};

// x (N, H, W, Cin), filters (KH, KW, Cin / groups, Cout) as Keras stores Conv2D kernels, bias
// (Cout) or an undefined Tensor for none -> (N, OH, OW, Cout). x, filters and bias share one dtype.
Tensor conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

// Depthwise: x (N, H, W, C), filters (KH, KW, C, M) as Keras stores DepthwiseConv2D kernels,
// bias (C * M) or undefined -> (N, OH, OW, C * M); output channel c * M + m reads input channel c.
// options.groups is ignored (it is C).
Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias = Tensor(),
                        const Conv2dOptions& options = {});

struct Pool2dOptions {
  std::array<int, 2> pool_size{2, 2};
  // Keras defaults the strides to pool_size; a C++ field cannot be "unset", so set both when
  // pool_size is not (2, 2) (the pooling layers do).
  std::array<int, 2> strides{2, 2};
  Padding padding = Padding::valid;
};
// (N, H, W, C) -> (N, OH, OW, C). Max pooling sends the gradient to the first maximum of each
// window; average pooling with `same` padding divides by the number of real (unpadded) elements,
// as Keras does.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});
// (N, H, W, C) -> (N, C), or (N, 1, 1, C) with KeepDims::yes; accumulated in float32.
Tensor global_avg_pool2d(const Tensor& x, KeepDims keep = KeepDims::no);

// Batch normalization over the channel axis (last) of x (..., C), rank >= 2; every other axis is
// a batch axis (M = numel / C elements per channel):
//   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta,   epsilon > 0 (Keras: 1e-3).
// dtypes: y has x's dtype. gamma, beta (and the moving statistics) have shape (C) and are float32
// or x's dtype: float32 under mixed policies (the float32 island of DESIGN §2.3; the 16-bit type
// is accepted too), float64 with float64 x; anything else is a DTypeError. The computation is in
// float32 (float64 for float64) and a 16-bit y is rounded once. Errors: x of rank < 2, or a (C)
// tensor of another length (ShapeError naming both shapes); epsilon <= 0 (ValueError).
//
// Training mode: normalizes with the batch mean and the BIASED batch variance (sum / M), computed
// in float32 in two passes (the mean, then the mean of (x - mean)^2; never E[x^2] - E[x]^2, which
// cancels when |mean| >> std), and returns them (shape (C), float32 — float64 for float64 x — not
// differentiable; a batch with no elements is a ValueError). The gradient goes through the batch
// statistics: with xhat = (x - mean) / sqrt(variance + epsilon),
//   dx = gamma / sqrt(variance + epsilon) * (dy - mean(dy) - xhat * mean(dy * xhat)),
//   dgamma = sum(dy * xhat), dbeta = sum(dy)  (in gamma's and beta's own dtypes).
// The op leaves moving statistics alone: the BatchNormalization layer applies Keras' update
//   moving_mean = moving_mean * momentum + mean * (1 - momentum)   (momentum: Keras 0.99)
// and the same for moving_variance. Keras 3 updates with this biased variance; TensorFlow's fused
// kernel (Keras 2, fused=True) with the unbiased one, variance * M / (M - 1): the layer chooses.
struct BatchNormOutput {
  Tensor y;
  Tensor mean;      // (C) batch mean
  Tensor variance;  // (C) biased batch variance
};
BatchNormOutput batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon);
// Inference mode: y = (x - moving_mean) / sqrt(moving_variance + epsilon) * gamma + beta.
// Differentiable in x, gamma and beta (a frozen base fine-tuned in inference mode), with the
// moving statistics as constants: dx = gamma / sqrt(moving_variance + epsilon) * dy.
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& moving_mean, const Tensor& moving_variance,
                            double epsilon);

// Zero padding of the spatial axes: (N, H, W, C) -> (N, top + H + bottom, left + W + right, C).
// A copy, so any dtype works; the gradient is the interior of the output gradient.
struct Padding2d {
  int top = 0, bottom = 0, left = 0, right = 0;  // each >= 0
};
Tensor zero_pad2d(const Tensor& x, const Padding2d& padding);

// Bilinear resize of the spatial axes: (N, H, W, C) -> (N, height, width, C), with half-pixel
// centers and no antialiasing (tf.image.resize(method="bilinear"), the Keras Resizing layer,
// PyTorch's interpolate(mode="bilinear", align_corners=False)). Along each axis output index o
// reads the input at s = (o + 0.5) * in / out - 0.5, clamped to [0, in - 1], between floor(s) and
// floor(s) + 1 (the border repeats). H, W, height, width >= 1 (ShapeError / ValueError). Computed
// in float32 (float64 for float64), rounded once; the gradient scatters each output gradient to
// the inputs it read, with the same weights.
Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width);

}  // namespace mixprec

#pragma GCC visibility pop
