// from_blob (include/mixprec/creation.h): a tensor over memory the library did not allocate.
#include <string>
#include <utility>

#include "core/tensor_impl.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"

namespace mixprec {

Tensor from_blob(void* data, DType dtype, const Shape& shape, std::vector<std::int64_t> strides,
                 std::function<void()> release, Device device) {
  if (strides.empty()) strides = contiguous_strides(shape);
  if (static_cast<int>(strides.size()) != shape.rank()) {
    throw ValueError("from_blob: " + std::to_string(strides.size()) + " strides for shape " +
                     shape.to_string() + " of rank " + std::to_string(shape.rank()));
  }
  // The storage spans the last element's byte; every extent and stride is checked so that the
  // product cannot wrap.
  std::int64_t last = 0;
  bool empty = false;
  for (int axis = 0; axis < shape.rank(); ++axis) {
    const std::int64_t extent = shape[axis];
    const std::int64_t stride = strides[static_cast<std::size_t>(axis)];
    if (extent < 0 || stride < 0) {
      throw ValueError("from_blob: shape " + shape.to_string() + " with stride " +
                       std::to_string(stride) + " on axis " + std::to_string(axis) +
                       ": extents and strides must be >= 0 (copy a reversed view first)");
    }
    if (extent == 0) empty = true;
    std::int64_t span = 0;
    if (extent > 0 && (__builtin_mul_overflow(extent - 1, stride, &span) ||
                       __builtin_add_overflow(last, span, &last))) {
      throw ValueError("from_blob: shape " + shape.to_string() + " overflows its strides");
    }
  }
  std::int64_t nbytes = 0;
  if (!empty &&
      __builtin_mul_overflow(last + 1, static_cast<std::int64_t>(dtype_size(dtype)), &nbytes)) {
    throw ValueError("from_blob: shape " + shape.to_string() + " overflows 64 bits in bytes");
  }
  if (data == nullptr && !empty) {
    throw ValueError("from_blob: null data for shape " + shape.to_string());
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<core::Storage>(data, static_cast<std::size_t>(nbytes), device,
                                                  std::move(release));
  impl->shape = shape;
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace mixprec
