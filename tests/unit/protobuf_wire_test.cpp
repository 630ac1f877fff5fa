// The protobuf wire-format pieces (src/io/protobuf_wire.h), byte by byte against the encoding
// rules of protobuf.dev/programming-guides/encoding.
#include "io/protobuf_wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mixprec::io::wire {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

std::string varint(std::uint64_t v) {
  std::string s;
  append_varint(s, v);
  return s;
}

TEST(ProtobufWireTest, VarintEdgeCases) {
  EXPECT_EQ(varint(0), bytes({0x00}));
  EXPECT_EQ(varint(1), bytes({0x01}));
  EXPECT_EQ(varint(127), bytes({0x7F}));
  EXPECT_EQ(varint(128), bytes({0x80, 0x01}));
  EXPECT_EQ(varint(150), bytes({0x96, 0x01}));  // the protobuf guide's example
  EXPECT_EQ(varint(300), bytes({0xAC, 0x02}));
  EXPECT_EQ(varint(16383), bytes({0xFF, 0x7F}));
  EXPECT_EQ(varint(16384), bytes({0x80, 0x80, 0x01}));
  EXPECT_EQ(varint(0xFFFFFFFFull), bytes({0xFF, 0xFF, 0xFF, 0xFF, 0x0F}));
  EXPECT_EQ(varint(std::numeric_limits<std::uint64_t>::max()),
            bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  for (std::uint64_t v : {0ull, 127ull, 128ull, 16384ull, 1ull << 35, ~0ull})
    EXPECT_EQ(varint_size(v), varint(v).size()) << v;
}

TEST(ProtobufWireTest, Int64FieldsAreTwosComplementVarints) {
  std::string s;
  append_int64_field(s, 2, 3);
  EXPECT_EQ(s, bytes({0x10, 0x03}));
  s.clear();
  append_int64_field(s, 2, -1);  // int64, not sint64: ten bytes
  EXPECT_EQ(s, bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  s.clear();
  append_int64_field(s, 2, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(s, bytes({0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}));
}

TEST(ProtobufWireTest, TagsCombineFieldNumberAndWireType) {
  std::string s;
  append_tag(s, 1, WireType::fixed64);
  append_tag(s, 2, WireType::fixed32);
  append_tag(s, 5, WireType::length_delimited);
  append_tag(s, 15, WireType::varint);
  append_tag(s, 16, WireType::varint);  // field numbers >= 16 need a two-byte key
  EXPECT_EQ(s, bytes({0x09, 0x15, 0x2A, 0x78, 0x80, 0x01}));
}

TEST(ProtobufWireTest, FixedWidthFieldsAreLittleEndianIeee) {
  std::string s;
  append_double_field(s, 1, 1.0);
  EXPECT_EQ(s, bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  s.clear();
  append_double_field(s, 4, -2.5);
  EXPECT_EQ(s, bytes({0x21, 0, 0, 0, 0, 0, 0, 0x04, 0xC0}));
  s.clear();
  append_float_field(s, 2, 1.0f);
  EXPECT_EQ(s, bytes({0x15, 0x00, 0x00, 0x80, 0x3F}));
  s.clear();
  append_float_field(s, 2, 0.0f);  // a oneof member: written even when zero
  EXPECT_EQ(s, bytes({0x15, 0, 0, 0, 0}));
}

TEST(ProtobufWireTest, LengthDelimitedFields) {
  std::string s;
  append_bytes_field(s, 1, "testing");
  EXPECT_EQ(s, bytes({0x0A, 0x07}) + "testing");
  s.clear();
  append_bytes_field(s, 3, "");
  EXPECT_EQ(s, bytes({0x1A, 0x00}));
  s.clear();
  const std::string long_value(200, 'x');
  append_bytes_field(s, 1, long_value);
  EXPECT_EQ(s, bytes({0x0A, 0xC8, 0x01}) + long_value);
}

TEST(ProtobufWireTest, PackedRepeatedDoubles) {
  std::string s;
  const std::vector<double> values = {1.0, -2.5};
  append_packed_doubles_field(s, 6, values);
  EXPECT_EQ(s, bytes({0x32, 0x10, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0, 0, 0, 0, 0, 0, 0x04, 0xC0}));
  s.clear();
  append_packed_doubles_field(s, 7, std::vector<double>{});
  EXPECT_EQ(s, "");
}

}  // namespace
}  // namespace mixprec::io::wire
