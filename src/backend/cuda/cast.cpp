#include "backend/cuda/cast.h"

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = core::make_tensor(x.shape(), dtype, x.device());
  if (out.numel() == 0) return out;
  StreamScope scope(x.device());
  const auto plan = make_plan<1>(x.shape(), {&x});
  kernels::cast(x.dtype(), dtype, plan, x.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
