#include "backend/cuda/softmax.h"

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernels/launch.h"
#include "core/axis_layout.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor softmax_forward(SoftmaxKind kind, const Tensor& x, int axis) {
  const Tensor src = contiguous(x.detach());
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  const core::AxisLayout a = core::layout_of(x.shape(), axis);
  StreamScope scope(x.device());
  kernels::softmax_forward(kind, x.dtype(), src.data_ptr(), a.outer, a.length, a.inner,
                           out.data_ptr(), scope.stream());
  return out;
}

Tensor softmax_backward(SoftmaxKind kind, const Tensor& g, const Tensor& y, int axis) {
  const Tensor gc = contiguous(g.detach());
  const Tensor yc = contiguous(y.detach());
  Tensor dx = core::make_tensor(y.shape(), y.dtype(), y.device());
  if (y.numel() == 0) return dx;
  const core::AxisLayout a = core::layout_of(y.shape(), axis);
  StreamScope scope(y.device());
  kernels::softmax_backward(kind, y.dtype(), gc.data_ptr(), yc.data_ptr(), a.outer, a.length,
                            a.inner, dx.data_ptr(), scope.stream());
  return dx;
}

}  // namespace mixprec::cuda
