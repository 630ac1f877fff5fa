// The row and column plan shared by the depthwise backward-filters loops (depthwise_filters.cpp)
// and bfloat16's AVX512_BF16 loop (depthwise_filters_bf16.cpp): which output columns of a row are
// interior (every tap reads inside the input row), which output rows a block sums at one filter
// row, and the channel-block widths of the register-blocked loop. Internal to those two files.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cpu/target_clones.h"
#include "core/window_geometry.h"

namespace mixprec::cpu::depthwise {

// Channels per register block of the register-blocked loop (KW sums of this many floats each are
// held in registers: 10 zmm at KW = 5), and the narrower block for the channels left over.
constexpr int kWideBlock = 32;
constexpr int kNarrowBlock = 16;

// The output columns [lo, hi) whose tap kw reads a column inside the input.
struct ColumnRange {
  std::int64_t lo = 0, hi = 0;
};

inline ColumnRange valid_columns(const ConvGeometry& g, std::int64_t kw) {
  const std::int64_t offset = kw * g.dilation_w - g.pad_left;  // iw = ow * stride_w + offset
  const std::int64_t s = g.stride_w;
  const std::int64_t lo = offset >= 0 ? 0 : (-offset + s - 1) / s;
  const std::int64_t limit = g.in_w - offset;  // ow * s < limit
  const std::int64_t hi = limit <= 0 ? 0 : std::min(g.out_w, (limit + s - 1) / s);
  return {lo, std::max(lo, hi)};
}

// What the register-blocked loop needs of the geometry: `kind` selects the specialisation (0: the
// generic loop only), [lo, hi) are the interior columns (every tap reads inside the row);
// bf16_dot: bfloat16 runs the AVX512_BF16 loop (depthwise_filters_bf16.h).
struct RowPlan {
  int kind = 0;  // kernel_w * 10 + stride_w: 31, 32, 51, 52
  std::int64_t lo = 0, hi = 0;
  bool bf16_dot = false;
};

inline RowPlan plan_rows(const ConvGeometry& g) {
  RowPlan p;
  const bool width = g.kernel_w == 3 || g.kernel_w == 5;
  const bool stride = g.stride_w == 1 || g.stride_w == 2;
  if (!width || !stride || g.dilation_w != 1 || g.in_channels < kNarrowBlock) return p;
  p.kind = static_cast<int>(g.kernel_w * 10 + g.stride_w);
  p.lo = std::min(valid_columns(g, 0).lo, g.out_w);  // a row narrower than the padding: all edge
  p.hi = std::max(p.lo, valid_columns(g, g.kernel_w - 1).hi);
  return p;
}

// One block's output rows [r0, r1) (r = n * out_h + oh) and the filter row kh they are summed
// for. for_each calls body(r, input row n * in_h + ih) for the rows whose ih at this kh is inside
// the input (stepping n and oh, no division per row).
struct RowSpan {
  std::int64_t kh = 0, r0 = 0, r1 = 0;
  template <typename Body>
  MIXPREC_CPU_ALWAYS_INLINE void for_each(const ConvGeometry& g, Body&& body) const {
    if (r0 >= r1) return;
    std::int64_t n = r0 / g.out_h, oh = r0 % g.out_h;
    const std::int64_t offset = kh * g.dilation_h - g.pad_top;  // ih = oh * stride_h + offset
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t ih = oh * g.stride_h + offset;
      if (ih >= 0 && ih < g.in_h) body(r, n * g.in_h + ih);  // else zero padding
      if (++oh == g.out_h) oh = 0, ++n;
    }
  }
};

}  // namespace mixprec::cpu::depthwise
