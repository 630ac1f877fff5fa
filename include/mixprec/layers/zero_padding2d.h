// ZeroPadding2D: adds rows and columns of zeros around an NHWC image.
//   (batch, H, W, C) -> (batch, top + H + bottom, left + W + right, C)
// The three Keras forms of `padding`:
//   ZeroPadding2D(1)                 1 everywhere
//   ZeroPadding2D(1, 2)              (symmetric_height, symmetric_width)
//   ZeroPadding2D({0, 1}, {2, 3})    ((top, bottom), (left, right))
// No variables; the output dtype is the compute dtype.
#pragma once

#include <array>

#include "mixprec/layers/layer.h"
#include "mixprec/nn_ops.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

class ZeroPadding2D : public Layer {
 public:
  // Every amount must be >= 0 (ValueError otherwise).
  explicit ZeroPadding2D(int padding = 1, LayerOptions options = {});
  ZeroPadding2D(int height_padding, int width_padding, LayerOptions options = {});
  ZeroPadding2D(std::array<int, 2> top_bottom, std::array<int, 2> left_right,
                LayerOptions options = {});
  Padding2d padding() const;
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
