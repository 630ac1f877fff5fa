#include "backend/cuda/indexing.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernels/launch.h"
#include "core/axis_layout.h"
#include "core/dispatch.h"
#include "core/scalar.h"
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

OneHotPatterns one_hot_patterns(DType dtype) {
  OneHotPatterns p;
  core::dispatch_dtype(dtype, [&]<typename T>() {
    const auto bits = [](T v) {
      std::uint64_t b = 0;
      std::memcpy(&b, &v, sizeof(T));  // little-endian: the low bytes hold the value
      return b;
    };
    p.one = bits(core::from_double<T>(1.0));
    p.zero = bits(core::from_double<T>(0.0));
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || core::is_half_v<T>) {
      p.bad = bits(core::from_double<T>(std::numeric_limits<double>::quiet_NaN()));
    } else {
      p.bad = p.zero;
    }
  });
  return p;
}

void one_hot(const Tensor& indices, std::int64_t depth, const Tensor& out) {
  if (out.numel() == 0) return;
  const Tensor src = contiguous(indices.detach());
  StreamScope scope(indices.device());
  Tensor handle = out;
  kernels::one_hot(indices.dtype(), src.data_ptr(), indices.numel(), depth, dtype_size(out.dtype()),
                   one_hot_patterns(out.dtype()), handle.data_ptr(), scope.stream());
}

}  // namespace mixprec::cuda
