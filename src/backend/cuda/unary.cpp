#include "backend/cuda/unary.h"

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<1>(x.shape(), {&x});
  kernels::unary(op, x.dtype(), plan, x.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<3>(x.shape(), {&g, &x, &y});
  kernels::unary_backward(op, x.dtype(), plan, g.data_ptr(), x.data_ptr(), y.data_ptr(),
                          out.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
