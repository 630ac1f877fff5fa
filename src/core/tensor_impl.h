// The data behind a Tensor handle. Internal: ops and backends use it, users see Tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/storage.h"
#include "mixprec/tensor.h"

namespace mixprec {

namespace autograd {
class Node;
}

struct TensorImpl {
  std::shared_ptr<core::Storage> storage;
  Shape shape;
  std::vector<std::int64_t> strides;  // in elements
  std::int64_t offset = 0;            // in elements
  DType dtype = DType::float32;

  // autograd
  bool requires_grad = false;
  Tensor grad;                              // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;  // the op that produced this tensor, if recorded
  std::shared_ptr<autograd::Node> grad_accumulator;  // leaf's accumulation node, made on first use
};

namespace core {
// A new contiguous tensor with fresh storage (contents uninitialised).
Tensor make_tensor(const Shape& shape, DType dtype, Device device);
// A view of `base`'s storage with the given geometry (no autograd state).
Tensor make_view(const Tensor& base, const Shape& shape, std::vector<std::int64_t> strides,
                 std::int64_t offset);
// x viewed with leading extent-1 axes up to `rank` (no copy, no autograd); x itself at that rank.
Tensor pad_rank(const Tensor& x, int rank);
}  // namespace core

}  // namespace mixprec
