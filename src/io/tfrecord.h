// TFRecord framing, the container of TensorBoard event files. Each record is
//   u64 length (little-endian) | u32 masked CRC-32C of those 8 bytes | data | u32 masked CRC-32C
//   of the data
// (the masks and CRC in src/io/crc32c.h). A reader checks the length's CRC before trusting the
// length, so a torn write at the end of a file is detected rather than read as a huge record.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mixprec::io {

// The bytes a record adds around its data.
inline constexpr std::size_t kTFRecordOverhead = 8 + 4 + 4;

// Appends one framed record holding `data` to `out`.
void append_tfrecord(std::string& out, std::string_view data);

}  // namespace mixprec::io
