// Tensor handle: geometry accessors, raw data access and autograd state. The Tensor methods that
// are ops (to, reshape, transpose, ...) are defined with the ops in src/ops/tensor_methods.cpp.
#include "mixprec/tensor.h"

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw ValueError("operation on an undefined tensor (default-constructed Tensor)");
  return *impl;
}
// -1 is reshape's placeholder; a tensor's own shape never has it.
void check_extents(const Shape& shape, const char* op) {
  for (auto d : shape) {
    if (d < 0) {
      throw ShapeError(std::string(op) + ": negative extent in shape " + shape.to_string());
    }
  }
}
}  // namespace

namespace core {

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  check_extents(shape, "tensor creation");
  // The byte count must not wrap around: a wrapped size would allocate a small block that the
  // creators then fill with numel elements.
  std::int64_t numel = 1, nbytes = 0;
  bool overflow = false;
  for (auto d : shape) overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
  overflow = overflow ||
             __builtin_mul_overflow(numel, static_cast<std::int64_t>(dtype_size(dtype)), &nbytes);
  if (overflow) {
    throw ValueError("cannot create a tensor of shape " + shape.to_string() + " and dtype " +
                     std::string(dtype_name(dtype)) + ": its size in bytes overflows 64 bits");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(nbytes), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, std::vector<std::int64_t> strides,
                 std::int64_t offset) {
  check_extents(shape, "view");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = checked(base.impl_ptr()).storage;
  impl->shape = shape;
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor pad_rank(const Tensor& x, int rank) {
  if (x.rank() == rank) return x;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank - x.rank()), 1);
  std::vector<std::int64_t> strides(dims.size(), x.numel());
  dims.insert(dims.end(), x.shape().begin(), x.shape().end());
  strides.insert(strides.end(), x.strides().begin(), x.strides().end());
  return make_view(x, Shape(dims), strides, x.offset());
}

}  // namespace core

const Shape& Tensor::shape() const { return checked(impl_).shape; }
int Tensor::rank() const { return shape().rank(); }
std::int64_t Tensor::dim(int axis) const {
  return shape()[normalize_axis(axis, rank(), "Tensor::dim")];
}
std::int64_t Tensor::numel() const { return shape().numel(); }
const std::vector<std::int64_t>& Tensor::strides() const { return checked(impl_).strides; }
std::int64_t Tensor::offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }

bool Tensor::is_contiguous() const {
  const auto& s = shape();
  const auto& st = strides();
  std::int64_t expected = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    if (s[i] != 1 && st[static_cast<std::size_t>(i)] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::data_ptr() {
  const auto& impl = checked(impl_);
  return static_cast<char*>(impl.storage->data()) +
         impl.offset * static_cast<std::int64_t>(dtype_size(impl.dtype));
}
const void* Tensor::data_ptr() const { return const_cast<Tensor*>(this)->data_ptr(); }

void Tensor::check_dtype_for_access(DType requested) const {
  if (requested != dtype()) {
    throw DTypeError("Tensor::data: requested " + std::string(dtype_name(requested)) +
                     " but the tensor holds " + std::string(dtype_name(dtype())) +
                     "; convert with .to(dtype) first");
  }
}

bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  checked(impl_);
  if (impl_->grad_fn) {
    throw AutogradError(
        "set_requires_grad: only leaf tensors can be marked; this tensor was produced by " +
        impl_->grad_fn->name() + " (use detach() first)");
  }
  if (requires_grad && !is_floating(impl_->dtype)) {
    throw DTypeError("set_requires_grad: only floating tensors can require gradients, got " +
                     std::string(dtype_name(impl_->dtype)));
  }
  impl_->requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return checked(impl_).grad_fn == nullptr; }
Tensor Tensor::grad() const { return checked(impl_).grad; }

void Tensor::set_grad(const Tensor& grad) {
  checked(impl_);
  if (grad.defined() && (grad.shape() != shape() || grad.dtype() != dtype())) {
    throw ValueError("set_grad: gradient " + grad.shape().to_string() + " " +
                     std::string(dtype_name(grad.dtype())) + " does not match tensor " +
                     shape().to_string() + " " + std::string(dtype_name(dtype())));
  }
  impl_->grad = grad;
}

void Tensor::zero_grad() { checked(impl_), impl_->grad = Tensor(); }

Tensor Tensor::detach() const {
  const auto& impl = checked(impl_);
  auto out = std::make_shared<TensorImpl>();
  out->storage = impl.storage;
  out->shape = impl.shape;
  out->strides = impl.strides;
  out->offset = impl.offset;
  out->dtype = impl.dtype;
  return Tensor(std::move(out));
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return checked(impl_).grad_fn; }

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  // A differentiable copy: the gradient of a copy is the gradient itself, reshaped to the view.
  Tensor out = core::make_tensor(shape(), dtype(), device());
  backend_for(device()).tensor->copy(detach(), out);
  struct CopyBackward final : autograd::Node {
    std::vector<Tensor> backward(const Tensor& g) override { return {g}; }
    std::string name() const override { return "ContiguousBackward"; }
  };
  return autograd::record(out, std::make_shared<CopyBackward>(), {*this});
}

}  // namespace mixprec
