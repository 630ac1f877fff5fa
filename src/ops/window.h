// Output-size arithmetic of sliding-window ops (convolution, pooling) along one spatial axis,
// shared so that every op applies Keras/TensorFlow's padding rules the same way.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/error.h"
#include "mixprec/nn_ops.h"

namespace mixprec::ops {

struct WindowDim {
  std::int64_t out = 0;         // output extent
  std::int64_t pad_before = 0;  // implicit zero rows/columns before the input (top/left)
  std::int64_t pad_after = 0;   // ... and after it (bottom/right); may exceed pad_before by one
};

// `window` = dilation * (kernel - 1) + 1 input elements covered by one output element.
// same:  out = ceil(in / stride), total padding = max((out - 1) * stride + window - in, 0), the odd
//        element going after (TensorFlow's rule, which Keras follows);
// valid: out = floor((in - window) / stride) + 1; a window larger than the input is a ValueError.
inline WindowDim window_dim(const char* op, const char* axis, std::int64_t in, std::int64_t kernel,
                            std::int64_t stride, std::int64_t dilation, Padding padding) {
  if (kernel < 1 || stride < 1 || dilation < 1) {
    throw ValueError(std::string(op) + ": kernel size, stride and dilation must be positive (got " +
                     std::to_string(kernel) + ", " + std::to_string(stride) + ", " +
                     std::to_string(dilation) + " along " + axis + ")");
  }
  const std::int64_t window = dilation * (kernel - 1) + 1;
  WindowDim d;
  if (padding == Padding::same) {
    d.out = (in + stride - 1) / stride;
    const std::int64_t total = (d.out - 1) * stride + window - in;
    const std::int64_t pad = total > 0 ? total : 0;
    d.pad_before = pad / 2;
    d.pad_after = pad - d.pad_before;
    return d;
  }
  if (window > in) {
    throw ValueError(std::string(op) + ": the window along " + axis + " (" +
                     std::to_string(window) + " with dilation) is larger than the input (" +
                     std::to_string(in) +
                     ") with padding 'valid'; use padding 'same' or a larger input");
  }
  d.out = (in - window) / stride + 1;
  return d;
}

}  // namespace mixprec::ops
