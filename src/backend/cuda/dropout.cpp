#include "backend/cuda/dropout.h"

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor dropout_apply(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Tensor src = contiguous(x.detach());
  StreamScope scope(x.device());
  kernels::dropout_apply(x.dtype(), src.data_ptr(), out.data_ptr(), out.numel(), base, threshold,
                         keep, scope.stream());
  return out;
}

}  // namespace mixprec::cuda
