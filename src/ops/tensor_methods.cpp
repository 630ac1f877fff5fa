// The Tensor member functions that are ops: thin forwards to the free functions of ops.h.
#include <sstream>

#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec {

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  throw DeviceError("Tensor::to(" + device.to_string() + "): this build of mixprec has no CUDA backend");
}

Tensor Tensor::reshape(const Shape& shape) const { return mixprec::reshape(*this, shape); }
Tensor Tensor::transpose(int axis0, int axis1) const { return mixprec::transpose(*this, axis0, axis1); }
Tensor Tensor::permute(const std::vector<int>& axes) const { return mixprec::permute(*this, axes); }
Tensor Tensor::slice(int axis, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  return mixprec::slice(*this, axis, start, stop, step);
}

}  // namespace mixprec
