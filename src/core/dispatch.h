// Runtime dtype dispatch: dtype is data, templates live only at the kernel leaf (DESIGN §7.3).
//   dispatch_floating(t.dtype(), "exp", [&]<typename T>() { kernel<T>(...); });
#pragma once

#include <string>

#include "mixprec/dtype.h"
#include "mixprec/error.h"

namespace mixprec::core {

template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
#define MIXPREC_DISPATCH_CASE(e, T, name) \
  case DType::e:                          \
    return f.template operator()<T>();
    MIXPREC_FOR_EACH_DTYPE(MIXPREC_DISPATCH_CASE)
#undef MIXPREC_DISPATCH_CASE
  }
  throw DTypeError("unknown dtype");
}

[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype, const char* supported);

// float32, float16, bfloat16, float64.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: return f.template operator()<float>();
    case DType::float16: return f.template operator()<float16>();
    case DType::bfloat16: return f.template operator()<bfloat16>();
    case DType::float64: return f.template operator()<double>();
    default: throw_unsupported_dtype(op, dtype, "float32, float16, bfloat16, float64");
  }
}

// The type floating kernels compute in: float for 32/16-bit storage, double for float64.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace mixprec::core
