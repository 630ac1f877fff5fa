// concat along one axis, for every dtype; differentiable: each input gets its slice of the
// gradient. Kernels in cpu/concat.cpp and cuda/concat.cpp (strided copies), by the device.
#include <string>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct ConcatBackward final : autograd::Node {
  int axis = 0;
  std::vector<std::int64_t> extents;  // each input's extent along axis, in order
  std::vector<Tensor> backward(const Tensor& g) override {
    // Only the inputs with an edge (those that require a gradient) get a copy of their slice.
    std::vector<bool> wanted(extents.size());
    for (std::size_t k = 0; k < extents.size(); ++k) wanted[k] = k < next.size() && next[k];
    return backend_for(g.device()).tensor->split(g, axis, extents, wanted);
  }
  std::string name() const override { return "ConcatBackward"; }
};

// Same dtype, device and rank as tensors[0], and equal extents except on `axis` (checked after
// the rank, so that `axis` can be normalised against it).
void check_concat_inputs(const std::vector<Tensor>& tensors) {
  const Tensor& first = tensors[0];
  for (std::size_t k = 1; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    ops::check_defined("concat", t);
    const std::string which = "tensor " + std::to_string(k);
    if (t.dtype() != first.dtype()) {
      throw DTypeError("concat: " + which + " is " + ops::describe(t) + " but tensor 0 is " +
                       ops::describe(first) + "; all inputs need one dtype, cast with .to(dtype)");
    }
    if (!(t.device() == first.device())) {
      throw DeviceError("concat: " + which + " is on " + t.device().to_string() +
                        " but tensor 0 is on " + first.device().to_string() +
                        "; move it with .to(device)");
    }
    if (t.rank() != first.rank()) {
      throw ShapeError("concat: " + which + " has shape " + t.shape().to_string() + " (rank " +
                       std::to_string(t.rank()) + ") but tensor 0 has shape " +
                       first.shape().to_string() + " (rank " + std::to_string(first.rank()) +
                       "); all inputs need the same rank");
    }
  }
}

}  // namespace

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw ValueError("concat: expects at least one tensor, got none");
  ops::check_defined("concat", tensors[0]);
  check_concat_inputs(tensors);
  const Tensor& first = tensors[0];
  const int a = normalize_axis(axis, first.rank(), "concat");
  std::vector<std::int64_t> dims(first.shape().begin(), first.shape().end());
  std::vector<std::int64_t> extents;
  std::int64_t total = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Shape& s = tensors[k].shape();
    for (int i = 0; i < s.rank(); ++i) {
      if (i != a && s[i] != first.shape()[i]) {
        throw ShapeError("concat: tensor " + std::to_string(k) + " has shape " + s.to_string() +
                         " but tensor 0 has shape " + first.shape().to_string() +
                         "; extents must match on every axis except the concat axis " +
                         std::to_string(axis) + " (they differ on axis " + std::to_string(i) + ")");
      }
    }
    extents.push_back(s[a]);
    total += s[a];
  }
  dims[static_cast<std::size_t>(a)] = total;
  Tensor out = core::make_tensor(Shape(dims), first.dtype(), first.device());
  backend_for(out.device()).tensor->concat(tensors, a, out);
  if (!autograd::needs_record(tensors)) return out;
  auto node = std::make_shared<ConcatBackward>();
  node->axis = a;
  node->extents = std::move(extents);
  return autograd::record(out, node, tensors);
}

}  // namespace mixprec
