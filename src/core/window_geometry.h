// The geometry of a windowed NHWC op (convolution, pooling) in elements, built and checked by the
// op layer (src/ops/window.h) and read unchanged by every backend.
#pragma once

#include <cstdint>

namespace mixprec {

// One convolution. x (batch, in_h, in_w, in_channels), filters (kernel_h, kernel_w, in_channels /
// groups, out_channels) in Keras's HWIO order, y (batch, out_h, out_w, out_channels). Output
// channel o belongs to group o / (out_channels / groups) and reads the input channels of that
// group. Input row ih = oh * stride_h - pad_top + kh * dilation_h (likewise for columns); rows
// outside [0, in_h) are the implicit zero padding. pad_bottom/pad_right complete the padded extent
// (TensorFlow's `same` puts the odd row/column there).
struct ConvGeometry {
  std::int64_t batch = 0, in_h = 0, in_w = 0, in_channels = 0;
  std::int64_t kernel_h = 0, kernel_w = 0, out_channels = 0, groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::int64_t out_h = 0, out_w = 0;

  std::int64_t in_per_group() const { return in_channels / groups; }
  std::int64_t out_per_group() const { return out_channels / groups; }
};

// One pooling. x (batch, in_h, in_w, channels) -> y (batch, out_h, out_w, channels). Window
// (oh, ow) covers rows oh * stride_h - pad_top + [0, window_h) and likewise columns; positions
// outside the input are padding, which never wins a max and is not counted by an average
// (Keras/TensorFlow). pad_bottom/pad_right complete the padded extent.
struct PoolGeometry {
  std::int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  std::int64_t window_h = 1, window_w = 1, stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  std::int64_t out_h = 0, out_w = 0;
};

}  // namespace mixprec
