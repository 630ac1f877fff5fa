// DType names, sizes, classification and parsing.
#include "mixprec/dtype.h"

#include <gtest/gtest.h>

#include <string>

#include "mixprec/error.h"

namespace mixprec {
namespace {

struct Expected {
  DType dtype;
  const char* name;
  std::size_t size;
  bool floating;
  bool half;
};

const Expected kAll[] = {
    {DType::float32, "float32", 4, true, false},  {DType::float16, "float16", 2, true, true},
    {DType::bfloat16, "bfloat16", 2, true, true}, {DType::float64, "float64", 8, true, false},
    {DType::int32, "int32", 4, false, false},     {DType::int64, "int64", 8, false, false},
    {DType::uint8, "uint8", 1, false, false},     {DType::bool_, "bool", 1, false, false},
};

TEST(DTypeTest, NamesSizesAndClasses) {
  for (const auto& e : kAll) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(dtype_name(e.dtype), e.name);
    EXPECT_EQ(dtype_size(e.dtype), e.size);
    EXPECT_EQ(is_floating(e.dtype), e.floating);
    EXPECT_EQ(is_16bit_float(e.dtype), e.half);
  }
}

TEST(DTypeTest, ParseRoundTripsEveryName) {
  for (const auto& e : kAll) {
    EXPECT_EQ(parse_dtype(e.name), e.dtype) << e.name;
  }
}

TEST(DTypeTest, ParseUnknownNameListsValidNames) {
  try {
    parse_dtype("float8");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("float8"), std::string::npos) << message;
    for (const auto& x : kAll) EXPECT_NE(message.find(x.name), std::string::npos) << message;
  }
  EXPECT_THROW(parse_dtype(""), ValueError);
  EXPECT_THROW(parse_dtype("Float32"), ValueError);  // names are case-sensitive
  EXPECT_THROW(parse_dtype("float32 "), Error);
}

TEST(DTypeTest, DtypeOfMapsStorageTypes) {
  static_assert(dtype_of<float>() == DType::float32);
  static_assert(dtype_of<double>() == DType::float64);
  static_assert(dtype_of<float16>() == DType::float16);
  static_assert(dtype_of<bfloat16>() == DType::bfloat16);
  static_assert(dtype_of<std::int32_t>() == DType::int32);
  static_assert(dtype_of<std::int64_t>() == DType::int64);
  static_assert(dtype_of<std::uint8_t>() == DType::uint8);
  static_assert(dtype_of<bool>() == DType::bool_);
  EXPECT_EQ(kFloat16, DType::float16);
  EXPECT_EQ(kBool, DType::bool_);
}

}  // namespace
}  // namespace mixprec
