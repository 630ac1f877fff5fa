#include "backend/cuda/unary.h"

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace {

kernels::Unary kernel_op(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return kernels::Unary::neg;
    case UnaryOp::exp: return kernels::Unary::exp;
    case UnaryOp::log: return kernels::Unary::log;
    case UnaryOp::sqrt: return kernels::Unary::sqrt;
    case UnaryOp::rsqrt: return kernels::Unary::rsqrt;
    case UnaryOp::abs: return kernels::Unary::abs;
    case UnaryOp::relu: return kernels::Unary::relu;
    case UnaryOp::relu6: return kernels::Unary::relu6;
    case UnaryOp::sigmoid: return kernels::Unary::sigmoid;
    case UnaryOp::tanh: return kernels::Unary::tanh;
    case UnaryOp::gelu: return kernels::Unary::gelu;
    case UnaryOp::gelu_tanh: return kernels::Unary::gelu_tanh;
    case UnaryOp::silu: return kernels::Unary::silu;
  }
  return kernels::Unary::neg;
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<1>(x.shape(), {&x});
  kernels::unary(kernel_op(op), x.dtype(), plan, x.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<3>(x.shape(), {&g, &x, &y});
  kernels::unary_backward(kernel_op(op), x.dtype(), plan, g.data_ptr(), x.data_ptr(), y.data_ptr(),
                          out.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
