// CRC-32C (src/io/crc32c.h): published check values, incremental use, and TFRecord's mask.
#include "io/crc32c.h"

#include <gtest/gtest.h>

#include <string>

#include "support/tfevents_decoder.h"

namespace mixprec::io {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(crc32c(std::string_view("")), 0x00000000u);
  EXPECT_EQ(crc32c(std::string_view("123456789")), 0xE3069283u);  // the CRC catalogue's check
  // RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32cTest, ContinuesAcrossChunksAndMatchesABitwiseReference) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>((i * 37 + 11) & 0xFF));
  const std::uint32_t whole = crc32c(data);
  EXPECT_EQ(whole, testing::tfevents::crc32c_bitwise(data));
  for (std::size_t split : {0u, 1u, 7u, 500u, 999u, 1000u}) {
    const std::string_view a = std::string_view(data).substr(0, split);
    const std::string_view b = std::string_view(data).substr(split);
    EXPECT_EQ(crc32c(b, crc32c(a)), whole) << split;
  }
}

TEST(Crc32cTest, MaskIsTFRecordsRotateAndAdd) {
  EXPECT_EQ(mask_crc32c(0u), 0xa282ead8u);
  // 0xE3069283 rotated right by 15: 0x2507C60D; plus the constant, modulo 2^32.
  EXPECT_EQ(mask_crc32c(0xE3069283u), 0x2507C60Du + 0xa282ead8u);
  for (std::uint32_t c : {0u, 1u, 0x80000000u, 0xFFFFFFFFu, 0xE3069283u}) {
    EXPECT_EQ(unmask_crc32c(mask_crc32c(c)), c);
    EXPECT_EQ(mask_crc32c(c), testing::tfevents::masked(c));
  }
}

}  // namespace
}  // namespace mixprec::io
