#include "backend/cuda/copy.h"

#include <cstring>

#include "backend/cuda/context.h"
#include "backend/cuda/plan.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

void copy_strided(const Tensor& src, const Tensor& dst) {
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype() || !(src.device() == dst.device())) {
    throw ValueError("cuda::copy_strided: source " + src.shape().to_string() + " " +
                     std::string(dtype_name(src.dtype())) + " on " + src.device().to_string() +
                     " does not match destination " + dst.shape().to_string() + " " +
                     std::string(dtype_name(dst.dtype())) + " on " + dst.device().to_string());
  }
  if (src.numel() == 0) return;
  StreamScope scope(src.device());
  Tensor d = dst;  // a handle to write through
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.data_ptr() == d.data_ptr()) return;
    check(cudaMemcpyAsync(d.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice,
                          scope.stream()),
          "cudaMemcpyAsync (device to device)");
    return;
  }
  const auto plan = make_strided<2>(src.shape(), {src.strides(), dst.strides()});
  kernels::copy(dtype_size(src.dtype()), plan, src.data_ptr(), d.data_ptr(), scope.stream());
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  copy_strided(x.detach(), out);
  return out;
}

void fill(const Tensor& t, double value) {
  if (!t.is_contiguous()) throw ValueError("cuda::fill: the tensor must be contiguous");
  if (t.numel() == 0) return;
  std::uint64_t pattern = 0;
  core::dispatch_dtype(t.dtype(), [&]<typename T>() {
    const T v = core::from_double<T>(value);
    static_assert(sizeof(T) <= sizeof(pattern));
    std::memcpy(&pattern, &v, sizeof(T));
  });
  StreamScope scope(t.device());
  Tensor handle = t;
  if (pattern == 0) {
    check(cudaMemsetAsync(handle.data_ptr(), 0, t.nbytes(), scope.stream()), "cudaMemsetAsync");
    return;
  }
  kernels::fill(dtype_size(t.dtype()), pattern, t.numel(), handle.data_ptr(), scope.stream());
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = core::make_tensor(shape, dtype, device);
  fill(t, value);
  return t;
}

}  // namespace mixprec::cuda
