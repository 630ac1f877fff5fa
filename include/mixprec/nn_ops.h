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
  std::array<int, 2> strides{2, 2};  // Keras: defaults to pool_size
  Padding padding = Padding::valid;
};
// (N, H, W, C) -> (N, OH, OW, C). Max pooling sends the gradient to the first maximum of each
// window; average pooling with `same` padding divides by the number of real (unpadded) elements,
// as Keras does.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});
// (N, H, W, C) -> (N, C), or (N, 1, 1, C) with KeepDims::yes; accumulated in float32.
Tensor global_avg_pool2d(const Tensor& x, KeepDims keep = KeepDims::no);

// Batch normalization over the channel axis (last) of x (..., C). gamma, beta, and the statistics
// are float32 under mixed policies (x may be 16-bit); the statistics are computed in float32 and
// y has x's dtype. Training mode: normalizes with the batch mean and the biased batch variance
// and returns them (float32, shape (C), not differentiable) for the moving averages.
struct BatchNormOutput {
  Tensor y;
  Tensor mean;      // (C) batch mean
  Tensor variance;  // (C) biased batch variance
};
BatchNormOutput batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon);
// Inference mode: y = (x - moving_mean) / sqrt(moving_variance + epsilon) * gamma + beta.
// Differentiable in x, gamma and beta (a frozen base fine-tuned in inference mode).
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& moving_mean, const Tensor& moving_variance,
                            double epsilon);

// Zero padding of the spatial axes: (N, H, W, C) -> (N, top + H + bottom, left + W + right, C).
struct Padding2d {
  int top = 0, bottom = 0, left = 0, right = 0;  // each >= 0
};
Tensor zero_pad2d(const Tensor& x, const Padding2d& padding);

// Bilinear resize of the spatial axes: (N, H, W, C) -> (N, height, width, C), with half-pixel
// centers and no antialiasing (tf.image.resize(method="bilinear"), the Keras Resizing layer).
Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width);

}  // namespace mixprec
