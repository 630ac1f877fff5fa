// The protocol-buffer wire format, the few pieces that TensorBoard's Event messages need
// (src/io/tensorboard_event.h says why they are encoded by hand). Each function appends one field
// to `out`: a key (field number << 3 | wire type) then the value.
//   varint:           7 bits a byte, least significant group first, high bit = "more follows"
//   fixed64 / fixed32: 8 / 4 bytes little-endian (double / float)
//   length-delimited: varint byte length, then the bytes (strings, sub-messages, packed repeats)
// Integers are little-endian on the wire whatever the host; nothing here depends on host order.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mixprec::io::wire {

enum class WireType : std::uint32_t {
  varint = 0,
  fixed64 = 1,
  length_delimited = 2,
  fixed32 = 5,
};

inline void append_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80u) {
    out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The number of bytes append_varint writes for v (1 to 10).
constexpr std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80u) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline void append_tag(std::string& out, std::uint32_t field, WireType type) {
  append_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint32_t>(type));
}

inline void append_fixed32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

inline void append_fixed64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// int64 fields (not sint64): a negative value is its two's complement as a 10-byte varint.
inline void append_int64_field(std::string& out, std::uint32_t field, std::int64_t v) {
  append_tag(out, field, WireType::varint);
  append_varint(out, static_cast<std::uint64_t>(v));
}

inline void append_double_field(std::string& out, std::uint32_t field, double v) {
  append_tag(out, field, WireType::fixed64);
  append_fixed64(out, std::bit_cast<std::uint64_t>(v));
}

inline void append_float_field(std::string& out, std::uint32_t field, float v) {
  append_tag(out, field, WireType::fixed32);
  append_fixed32(out, std::bit_cast<std::uint32_t>(v));
}

// A string, bytes or an already encoded sub-message.
inline void append_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) {
  append_tag(out, field, WireType::length_delimited);
  append_varint(out, bytes.size());
  out.append(bytes);
}

// repeated double [packed = true] (the proto3 default): one length-delimited field holding the
// values as consecutive fixed64. Nothing is written for an empty list (as protobuf does).
inline void append_packed_doubles_field(std::string& out, std::uint32_t field,
                                        std::span<const double> values) {
  if (values.empty()) return;
  append_tag(out, field, WireType::length_delimited);
  append_varint(out, values.size() * 8);
  for (double v : values) append_fixed64(out, std::bit_cast<std::uint64_t>(v));
}

}  // namespace mixprec::io::wire
