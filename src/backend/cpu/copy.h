// Strided copies on the CPU (materialising views).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixprec/shape.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Copies the elements of a strided view (strides in elements, `src` at the view's first element)
// into `dst` in row-major order. `element_size` is 1, 2, 4 or 8 bytes.
void strided_to_contiguous(const void* src, const Shape& shape,
                           const std::vector<std::int64_t>& strides, std::size_t element_size,
                           void* dst);

// dst = src element for element (TensorKernels::copy): same shape and dtype, any strides on both
// sides; a strided destination (a window of a larger tensor) is written through its strides.
void copy(const Tensor& src, const Tensor& dst);

}  // namespace mixprec::cpu
