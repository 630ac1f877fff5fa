#include "backend/cpu/cast.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "backend/kernel_math/cast_math.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {
// Values pass through float when both ends fit in it (16/32-bit floats, uint8, bool), so 16-bit
// conversions use the bulk F16C path; through double otherwise (float64, 32/64-bit integers).
template <typename T>
constexpr bool fits_float = !std::is_same_v<T, double> && !std::is_same_v<T, std::int32_t> &&
                            !std::is_same_v<T, std::int64_t>;
}  // namespace

namespace {
// Contiguous float32 <-> float16/bfloat16: one bulk conversion per block, no staging copy (the
// weight casts of every mixed-precision step take this path).
template <typename From, typename To>
void convert_contiguous(const Tensor& x, Tensor& out) {
  const From* in = static_cast<const From*>(x.data_ptr());
  To* o = static_cast<To*>(out.data_ptr());
  const std::int64_t n = x.numel();
  constexpr std::int64_t kBlock = 1 << 14;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, n >= kParallelThreshold, [&](std::int64_t b) {
    const std::int64_t start = b * kBlock;
    convert(in + start, o + start, static_cast<std::size_t>(std::min(kBlock, n - start)));
  });
}

bool bulk_convert(const Tensor& x, Tensor& out) {
  if (!x.is_contiguous()) return false;
  const DType from = x.dtype(), to = out.dtype();
  if (from == DType::float32 && to == DType::float16)
    convert_contiguous<float, float16>(x, out);
  else if (from == DType::float32 && to == DType::bfloat16)
    convert_contiguous<float, bfloat16>(x, out);
  else if (from == DType::float16 && to == DType::float32)
    convert_contiguous<float16, float>(x, out);
  else if (from == DType::bfloat16 && to == DType::float32)
    convert_contiguous<bfloat16, float>(x, out);
  else
    return false;
  return true;
}
}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = core::make_tensor(x.shape(), dtype, x.device());
  if (bulk_convert(x, out)) return out;
  core::dispatch_dtype(x.dtype(), [&]<typename In>() {
    core::dispatch_dtype(dtype, [&]<typename Out>() {
      if constexpr (std::is_integral_v<In> && std::is_integral_v<Out> &&
                    !std::is_same_v<Out, bool>) {
        // Integer to integer: exact (int64 beyond 2^53 must not pass through double).
        const Tensor src = x.detach().contiguous();
        const In* in = static_cast<const In*>(src.data_ptr());
        Out* o = static_cast<Out*>(out.data_ptr());
        const std::int64_t n = x.numel();
        parallel_for(n, n >= kParallelThreshold,
                     [&](std::int64_t i) { o[i] = static_cast<Out>(in[i]); });
        return;
      }
      using C = std::conditional_t<fits_float<In> && fits_float<Out>, float, double>;
      map_elementwise<C, Out, In>({&x}, out, [](C* o, const C* v, std::int64_t n) {
        if constexpr (std::is_same_v<Out, bool>) {
          for (std::int64_t i = 0; i < n; ++i) o[i] = v[i] != C(0) ? C(1) : C(0);
        } else if constexpr (std::is_integral_v<Out>) {
          // Float to integer: truncated, NaN -> 0, saturated (kernel_math, shared with CUDA).
          for (std::int64_t i = 0; i < n; ++i) o[i] = C(kernel_math::saturating_cast<Out>(v[i]));
        } else {
          std::copy(v, v + n, o);
        }
      });
    });
  });
  return out;
}

namespace {
void round_blocks(const float* in, float* out, std::int64_t n, DType dtype) {
  if (dtype != DType::float16 && dtype != DType::bfloat16) {
    throw DTypeError(std::string("round_to_precision: expected float16 or bfloat16, got ") +
                     std::string(dtype_name(dtype)));
  }
  constexpr std::int64_t kBlock = 1 << 14;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, n >= kParallelThreshold, [&](std::int64_t b) {
    const std::int64_t start = b * kBlock;
    const auto count = static_cast<std::size_t>(std::min(kBlock, n - start));
    if (dtype == DType::float16)
      round_to_float16(in + start, out + start, count);
    else
      round_to_bfloat16(in + start, out + start, count);
  });
}

void check_float32_contiguous(const Tensor& x) {
  if (x.dtype() != DType::float32 || !x.is_contiguous()) {
    throw DTypeError("round_to_precision: expected a contiguous float32 tensor, got " +
                     std::string(dtype_name(x.dtype())) + " " + x.shape().to_string());
  }
}
}  // namespace

void round_to_precision_in_place(Tensor& x, DType dtype) {
  check_float32_contiguous(x);
  float* p = x.data<float>();
  round_blocks(p, p, x.numel(), dtype);
}

Tensor round_to_precision(const Tensor& x, DType dtype) {
  check_float32_contiguous(x);
  Tensor out = core::make_tensor(x.shape(), DType::float32, x.device());
  round_blocks(x.data<float>(), out.data<float>(), x.numel(), dtype);
  return out;
}

}  // namespace mixprec::cpu
