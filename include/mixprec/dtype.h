// Data types. The one list of dtypes is the X-macro MIXPREC_FOR_EACH_DTYPE; everything that
// enumerates dtypes (names, sizes, dispatch) expands it, so adding a dtype is one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// X(enumerator, C++ storage type, user-facing name)
#define MIXPREC_FOR_EACH_DTYPE(X)              \
  X(float32, float, "float32")                 \
  X(float16, ::mixprec::float16, "float16")    \
  X(bfloat16, ::mixprec::bfloat16, "bfloat16") \
  X(float64, double, "float64")                \
  X(int32, std::int32_t, "int32")              \
  X(int64, std::int64_t, "int64")              \
  X(uint8, std::uint8_t, "uint8")              \
  X(bool_, bool, "bool")

enum class DType : std::uint8_t {
#define MIXPREC_DTYPE_ENUM(e, T, name) e,
  MIXPREC_FOR_EACH_DTYPE(MIXPREC_DTYPE_ENUM)
#undef MIXPREC_DTYPE_ENUM
};

// Short aliases so users can write mp::float32 etc. where a DType is expected.
inline constexpr DType kFloat32 = DType::float32;
inline constexpr DType kFloat16 = DType::float16;
inline constexpr DType kBFloat16 = DType::bfloat16;
inline constexpr DType kFloat64 = DType::float64;
inline constexpr DType kInt32 = DType::int32;
inline constexpr DType kInt64 = DType::int64;
inline constexpr DType kUInt8 = DType::uint8;
inline constexpr DType kBool = DType::bool_;

std::string_view dtype_name(DType dtype);
// Writes dtype_name(dtype): `std::cout << x.dtype()` prints "float16".
std::ostream& operator<<(std::ostream& os, DType dtype);
std::size_t dtype_size(DType dtype);
bool is_floating(DType dtype);     // float32, float16, bfloat16, float64
bool is_16bit_float(DType dtype);  // float16, bfloat16
// Parses a dtype name ("float16", "bfloat16", ...); an unknown name throws a ValueError that lists
// the valid names.
DType parse_dtype(std::string_view name);

// The DType of a C++ storage type: dtype_of<float>() == DType::float32.
template <typename T>
constexpr DType dtype_of();
#define MIXPREC_DTYPE_OF(e, T, name) \
  template <>                        \
  constexpr DType dtype_of<T>() {    \
    return DType::e;                 \
  }
MIXPREC_FOR_EACH_DTYPE(MIXPREC_DTYPE_OF)
#undef MIXPREC_DTYPE_OF

}  // namespace mixprec

#pragma GCC visibility pop
