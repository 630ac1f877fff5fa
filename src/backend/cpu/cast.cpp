#include "backend/cpu/cast.h"

#include "backend/cpu/elementwise.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {
// Values pass through float when both ends fit in it (16/32-bit floats, uint8, bool), so 16-bit
// conversions use the bulk F16C path; through double otherwise (float64, 32/64-bit integers).
template <typename T>
constexpr bool fits_float = !std::is_same_v<T, double> && !std::is_same_v<T, std::int32_t> &&
                            !std::is_same_v<T, std::int64_t>;
}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = core::make_tensor(x.shape(), dtype, x.device());
  core::dispatch_dtype(x.dtype(), [&]<typename In>() {
    core::dispatch_dtype(dtype, [&]<typename Out>() {
      using C = std::conditional_t<fits_float<In> && fits_float<Out>, float, double>;
      map_elementwise<C, Out, In>({&x}, out, [](C* o, const C* v, std::int64_t n) {
        if constexpr (std::is_same_v<Out, bool>) {
          for (std::int64_t i = 0; i < n; ++i) o[i] = v[i] != C(0) ? C(1) : C(0);
        } else {
          std::copy(v, v + n, o);
        }
      });
    });
  });
  return out;
}

}  // namespace mixprec::cpu
