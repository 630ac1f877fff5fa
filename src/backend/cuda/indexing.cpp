#include "backend/cuda/indexing.h"

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernels/launch.h"
#include "core/axis_layout.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

void argmax(const Tensor& x, int axis, const Tensor& out) {
  if (out.numel() == 0) return;
  const Tensor src = contiguous(x.detach());
  const core::AxisLayout a = core::layout_of(x.shape(), axis);
  StreamScope scope(x.device());
  Tensor handle = out;
  kernels::argmax(x.dtype(), src.data_ptr(), a.outer, a.length, a.inner,
                  static_cast<std::int64_t*>(handle.data_ptr()), scope.stream());
}

}  // namespace mixprec::cuda
