#include "mixprec/dtype.h"

#include <array>
#include <ostream>

#include "core/dispatch.h"
#include "mixprec/error.h"

namespace mixprec {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr std::array kDTypes = {
#define MIXPREC_DTYPE_INFO(e, T, name) DTypeInfo{DType::e, name, sizeof(T)},
    MIXPREC_FOR_EACH_DTYPE(MIXPREC_DTYPE_INFO)
#undef MIXPREC_DTYPE_INFO
};
}  // namespace

std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)].name; }

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }
std::size_t dtype_size(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)].size; }

bool is_floating(DType dtype) {
  return dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16 ||
         dtype == DType::float64;
}
bool is_16bit_float(DType dtype) { return dtype == DType::float16 || dtype == DType::bfloat16; }

DType parse_dtype(std::string_view name) {
  std::string valid;
  for (const auto& info : kDTypes) {
    if (info.name == name) return info.dtype;
    valid += valid.empty() ? "" : ", ";
    valid += info.name;
  }
  throw ValueError("unknown dtype '" + std::string(name) + "'; valid dtypes: " + valid);
}

namespace core {
void throw_unsupported_dtype(const char* op, DType dtype, const char* supported) {
  throw DTypeError(std::string(op) + " does not support dtype " + std::string(dtype_name(dtype)) +
                   "; supported: " + supported);
}
}  // namespace core

}  // namespace mixprec
