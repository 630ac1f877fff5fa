// CPU fill: memset for zero (all-zero bits is 0 in every dtype), a parallel loop otherwise.
#include "backend/cpu/fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dispatch.h"
#include "core/scalar.h"

namespace mixprec::cpu {

void fill(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  Tensor handle = t;  // a handle: writing through it writes t's storage
  if (value == 0.0 && !std::signbit(value)) {
    std::memset(handle.data_ptr(), 0, t.nbytes());
    return;
  }
  core::dispatch_dtype(t.dtype(), [&]<typename T>() {
    const T v = core::from_double<T>(value);
    T* out = static_cast<T*>(handle.data_ptr());
    const std::int64_t n = t.numel();
    if (n <= (1 << 16)) {
      std::fill(out, out + n, v);
      return;
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) out[i] = v;
  });
}

}  // namespace mixprec::cpu
