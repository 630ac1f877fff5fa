// The Tensor member functions that are ops: thin forwards to the free functions of ops.h.
#include <cstring>
#include <sstream>

#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  throw DeviceError("Tensor::to(" + device.to_string() +
                    "): this build of mixprec has no CUDA backend");
}

void Tensor::assign(const Tensor& src) const {
  ops::check_defined("assign", *this);
  ops::check_defined("assign", src);
  if (src.shape() != shape()) {
    throw ShapeError("assign: cannot write " + ops::describe(src) + " into " +
                     ops::describe(*this) + "; the shapes must be equal");
  }
  if (!is_contiguous()) throw ValueError("assign: the destination must be contiguous");
  if (!(src.device() == device())) {
    throw DeviceError("assign: source on " + src.device().to_string() + ", destination on " +
                      device().to_string() + "; move the source with .to(device) first");
  }
  NoGradScope no_grad;
  const Tensor values = src.detach().to(dtype()).contiguous();
  if (values.same(*this) || values.data_ptr() == data_ptr()) return;
  ops::check_cpu("assign", *this);
  Tensor dst = *this;  // a handle: writing through it writes this tensor's storage
  std::memcpy(dst.data_ptr(), values.data_ptr(), nbytes());
}

Tensor Tensor::reshape(const Shape& shape) const { return mixprec::reshape(*this, shape); }
Tensor Tensor::transpose(int axis0, int axis1) const {
  return mixprec::transpose(*this, axis0, axis1);
}
Tensor Tensor::permute(const std::vector<int>& axes) const { return mixprec::permute(*this, axes); }
Tensor Tensor::slice(int axis, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  return mixprec::slice(*this, axis, start, stop, step);
}

}  // namespace mixprec
