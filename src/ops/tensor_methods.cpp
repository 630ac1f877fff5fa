// The Tensor member functions that are ops: thin forwards to the free functions of ops.h, and the
// device moves and in-place writes, which go to the backend of the device involved.
#include <cstring>
#include <sstream>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/transfer.h"
#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

// The gradient of a device move is the gradient moved back.
struct ToDeviceBackward final : autograd::Node {
  Device source;
  std::vector<Tensor> backward(const Tensor& g) override { return {g.to(source)}; }
  std::string name() const override { return "ToDeviceBackward"; }
};

}  // namespace

Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }

// Moved by the backend of the non-CPU end (core/transfer.h; on a GPU through pinned staging
// buffers on its copy stream, ordered with its compute stream). Differentiable.
Tensor Tensor::to(Device device) const {
  ops::check_defined("to", *this);
  if (device == this->device()) return *this;
  Tensor out = core::transfer(detach(), device);
  if (!is_floating(dtype()) || !autograd::needs_record({this})) return out;
  auto node = std::make_shared<ToDeviceBackward>();
  node->source = this->device();
  return autograd::record(out, node, {*this});
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
  Tensor dst = *this;  // a handle: writing through it writes this tensor's storage
  // Converted and copied where the tensor lives (on a GPU: ordered on its compute stream with the
  // work that reads this tensor before and after).
  const TensorKernels& kernels = *backend_for(device()).tensor;
  const Tensor s = src.detach();
  const Tensor values = s.dtype() == dtype() ? s : kernels.cast(s, dtype());
  if (values.same(*this) || values.data_ptr() == dst.data_ptr()) return;
  kernels.copy(values, dst);
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
