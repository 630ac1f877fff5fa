#include "backend/cuda/binary.h"

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "backend/cuda/unary.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "binary");
  Tensor out = core::make_tensor(shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  StreamScope scope(a.device());
  const auto plan = make_plan<2>(shape, {&a, &b});
  kernels::binary(op, a.dtype(), plan, a.data_ptr(), b.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || !a.is_contiguous() || !b.is_contiguous() || a.numel() == 0) {
    return unary(UnaryOp::relu, binary(BinaryOp::add, a, b));
  }
  Tensor out = core::make_tensor(a.shape(), a.dtype(), a.device());
  StreamScope scope(a.device());
  kernels::add_relu_dense(a.dtype(), a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(),
                          scope.stream());
  return out;
}

}  // namespace mixprec::cuda
