#include "backend/cuda/select.h"

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "backend/cuda/transfer.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "compare");
  Tensor out = core::make_tensor(shape, DType::bool_, a.device());
  if (out.numel() == 0) return out;
  StreamScope scope(a.device());
  const auto plan = make_plan<2>(shape, {&a, &b});
  kernels::compare(op, a.dtype(), plan, a.data_ptr(), b.data_ptr(),
                   static_cast<bool*>(out.data_ptr()), scope.stream());
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = core::make_tensor(shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  StreamScope scope(a.device());
  const auto plan = make_plan<3>(shape, {&cond, &a, &b});
  kernels::where(a.dtype(), plan, static_cast<const bool*>(cond.data_ptr()), a.data_ptr(),
                 b.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

Tensor is_finite(const Tensor& x) {
  Tensor out = core::make_tensor(x.shape(), DType::bool_, x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<1>(x.shape(), {&x});
  kernels::is_finite(x.dtype(), plan, x.data_ptr(), static_cast<bool*>(out.data_ptr()),
                     scope.stream());
  return out;
}

bool all_finite(const Tensor& x) {
  if (!is_floating(x.dtype()) || x.numel() == 0) return true;
  // One int on the device, set to 1 and cleared by any block that sees Inf or NaN.
  Tensor flag = core::make_tensor(Shape{}, DType::int32, x.device());
  {
    StreamScope scope(x.device());
    kernels::fill(sizeof(int), 1, 1, flag.data_ptr(), scope.stream());
    const auto plan = make_plan<1>(x.shape(), {&x});
    kernels::all_finite(x.dtype(), plan, x.data_ptr(), static_cast<int*>(flag.data_ptr()),
                        scope.stream());
  }
  int result = 0;
  copy_device_to_host(x.device(), &result, flag.data_ptr(), sizeof(int));
  return result != 0;
}

}  // namespace mixprec::cuda
