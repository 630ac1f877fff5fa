// CRC-32C (Castagnoli), the checksum of the TFRecord framing around TensorBoard event files, and
// TFRecord's "masked" form of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mixprec::io {

// The CRC-32C of `bytes` bytes at `data`: reflected polynomial 0x82F63B78, initial value and final
// xor 0xFFFFFFFF (the iSCSI/ext4 checksum; "123456789" gives 0xE3069283). `crc` continues a
// checksum over earlier bytes: crc32c(ab) == crc32c(b, crc32c(a)).
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0);
inline std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0) {
  return crc32c(bytes.data(), bytes.size(), crc);
}

// TFRecord stores masked CRCs (rotate right by 15, add a constant) so that a CRC computed over
// data that itself contains CRCs does not degenerate.
constexpr std::uint32_t mask_crc32c(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
constexpr std::uint32_t unmask_crc32c(std::uint32_t masked) {
  const std::uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace mixprec::io
