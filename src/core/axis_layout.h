// A contiguous tensor seen as (outer, length, inner) around one axis: the axis has stride `inner`,
// so with the axis last (inner == 1) every line along it is contiguous. Used by per-axis kernels
// (softmax, argmax).
#pragma once

#include <cstdint>

#include "mixprec/shape.h"

namespace mixprec::core {

struct AxisLayout {
  std::int64_t outer = 1, length = 1, inner = 1;
};

inline AxisLayout layout_of(const Shape& shape, int axis) {
  AxisLayout a;
  for (int i = 0; i < axis; ++i) a.outer *= shape[i];
  a.length = shape[axis];
  for (int i = axis + 1; i < shape.rank(); ++i) a.inner *= shape[i];
  return a;
}

}  // namespace mixprec::core
