// Tensor: a strided view (shape, strides, offset) of reference-counted storage, with a dtype and a
// device, plus the autograd state of a differentiable value. Copying a Tensor is cheap and shares
// storage, like a Python reference; ops return new tensors (views share storage where noted).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/device.h"
#include "mixprec/dtype.h"
#include "mixprec/shape.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct TensorImpl;
namespace autograd {
class Node;
}

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int rank() const;
  std::int64_t dim(int axis) const;  // negative axes count from the end
  std::int64_t numel() const;
  const std::vector<std::int64_t>& strides() const;  // in elements
  std::int64_t offset() const;                       // in elements, into the storage
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }

  // Pointer to the first element (storage + offset). data<T>() checks that T matches the dtype.
  void* data_ptr();
  const void* data_ptr() const;
  template <typename T>
  T* data() {
    check_dtype_for_access(dtype_of<T>());
    return static_cast<T*>(data_ptr());
  }
  template <typename T>
  const T* data() const {
    check_dtype_for_access(dtype_of<T>());
    return static_cast<const T*>(data_ptr());
  }

  // A contiguous tensor with the same values (this tensor itself if already contiguous).
  Tensor contiguous() const;
  // Conversions; differentiable. to(dtype) of the same dtype returns this tensor.
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  // Writes `src` (same shape; converted to this tensor's dtype) into this tensor's storage in
  // place, so every handle of a variable sees the new values. Not recorded by autograd; this
  // tensor must be contiguous and on the same device as `src`.
  void assign(const Tensor& src) const;
  // The values in row-major order, converted to T (T may differ from the dtype).
  template <typename T>
  std::vector<T> to_vector() const;
  // The value of a one-element tensor, converted to double (ValueError for any other size).
  double item() const;
  // The same converted to T, as PyTorch's `loss.item()` read into a typed variable:
  // `float l = loss.item<float>()`. T is the storage type of a dtype (float, double, float16,
  // bfloat16, std::int32_t, std::int64_t, std::uint8_t, bool); an integer T reads an int64 value
  // exactly, with no detour through double.
  template <typename T>
  T item() const;

  // Views (share storage; differentiable).
  Tensor reshape(const Shape& shape) const;  // one extent may be -1; copies if not viewable
  Tensor transpose(int axis0, int axis1) const;
  Tensor permute(const std::vector<int>& axes) const;
  Tensor slice(int axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;

  std::string to_string() const;

  // ---- autograd ----
  bool requires_grad() const;
  // Marks a leaf tensor as a variable whose gradient is accumulated by backward().
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;  // no grad_fn: created by the user, not by a recorded op
  Tensor grad() const;   // accumulated gradient (undefined until a backward pass reaches it)
  void set_grad(const Tensor& grad);
  void zero_grad();  // drops the accumulated gradient
  // Reverse-mode pass from this tensor. A non-scalar needs `gradient` (same shape and dtype).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // The same values without autograd history (shares storage).
  Tensor detach() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  void check_dtype_for_access(DType requested) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Arithmetic operators; defined in ops (see ops.h for the full list and broadcasting rules).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace mixprec

#pragma GCC visibility pop
