// Helpers shared by the depthwise kernel tests (tests/ops/depthwise_conv_test.cpp,
// depthwise_filters_test.cpp): the geometry of a depthwise case with TensorFlow's padding (their
// error bound, within_summation_bound, is support/summation_bound.h's).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/window_geometry.h"
#include "mixprec/mixprec.h"
#include "support/summation_bound.h"  // within_summation_bound

namespace mixprec::testing {

// TensorFlow's padding along one axis: the output size and the padding before / after.
inline void depthwise_axis(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                           bool same, std::int64_t& out, std::int64_t& before,
                           std::int64_t& after) {
  const std::int64_t extent = (k - 1) * d + 1;
  out = same ? (in + s - 1) / s : (in - extent) / s + 1;
  const std::int64_t total = same ? std::max<std::int64_t>((out - 1) * s + extent - in, 0) : 0;
  before = total / 2;
  after = total - before;
}

// A depthwise convolution of an (n, h, w, c) input with a (kh, kw) kernel, one filter per channel.
inline ConvGeometry depthwise_geometry(std::int64_t n, std::int64_t h, std::int64_t w,
                                       std::int64_t c, std::int64_t kh, std::int64_t kw,
                                       std::int64_t stride, std::int64_t dilation, bool same) {
  ConvGeometry g;
  g.batch = n, g.in_h = h, g.in_w = w, g.in_channels = c;
  g.kernel_h = kh, g.kernel_w = kw, g.out_channels = c, g.groups = c;
  g.stride_h = g.stride_w = stride;
  g.dilation_h = g.dilation_w = dilation;
  depthwise_axis(h, kh, stride, dilation, same, g.out_h, g.pad_top, g.pad_bottom);
  depthwise_axis(w, kw, stride, dilation, same, g.out_w, g.pad_left, g.pad_right);
  return g;
}

}  // namespace mixprec::testing
