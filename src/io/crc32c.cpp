// CRC-32C (src/io/crc32c.h): byte-at-a-time with a 256-entry table built at compile time. Event
// files are small (kilobytes per epoch) and written on a background thread, so the slicing-by-8
// or SSE4.2 crc32 instruction variants would buy nothing measurable here.
#include "io/crc32c.h"

#include <array>

namespace mixprec::io {

namespace {

constexpr std::uint32_t kReflectedPolynomial = 0x82F63B78u;

// table[b]: the CRC register after shifting the byte b through it (LSB first).
constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kReflectedPolynomial : r >> 1;
    table[b] = r;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t r = ~crc;
  for (std::size_t i = 0; i < bytes; ++i) r = kTable[(r ^ p[i]) & 0xFFu] ^ (r >> 8);
  return ~r;
}

}  // namespace mixprec::io
