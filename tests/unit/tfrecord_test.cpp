// TFRecord framing (src/io/tfrecord.h): layout byte by byte, both CRCs against the test decoder's
// independent bit-by-bit CRC-32C, and records read back in sequence.
#include "io/tfrecord.h"

#include <gtest/gtest.h>

#include <string>

#include "support/tfevents_decoder.h"

namespace mixprec::io {
namespace {

namespace dec = testing::tfevents;

TEST(TFRecordTest, LayoutIsLengthCrcDataCrc) {
  std::string out = "prefix";  // appends, never overwrites
  append_tfrecord(out, "abc");
  ASSERT_EQ(out.size(), 6 + kTFRecordOverhead + 3);
  const std::string_view r = std::string_view(out).substr(6);
  EXPECT_EQ(r.substr(0, 8), std::string_view("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(dec::read_le(r, 8, 4), dec::masked(dec::crc32c_bitwise(r.substr(0, 8))));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(dec::read_le(r, 15, 4), dec::masked(dec::crc32c_bitwise("abc")));
}

TEST(TFRecordTest, EmptyAndLargeRecordsReadBack) {
  std::string out;
  const std::string large(70000, 'z');  // a length needing three bytes
  append_tfrecord(out, "");
  append_tfrecord(out, large);
  append_tfrecord(out, std::string("\0\x01\xFF", 3));
  const std::vector<std::string> records = dec::split_records(out);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], "");
  EXPECT_EQ(records[1], large);
  EXPECT_EQ(records[2], std::string("\0\x01\xFF", 3));
}

TEST(TFRecordTest, TheDecoderCatchesEveryCorruptedByteOfARecord) {
  // The decoder the writer tests rely on must be able to fail: flip each byte of one record.
  std::string good;
  append_tfrecord(good, "hello");
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    EXPECT_THROW(dec::split_records(bad), std::runtime_error) << "byte " << i;
  }
  EXPECT_THROW(dec::split_records(good.substr(0, good.size() - 1)), std::runtime_error);
}

}  // namespace
}  // namespace mixprec::io
