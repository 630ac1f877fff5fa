// TFRecord framing (src/io/tfrecord.h).
#include "io/tfrecord.h"

#include <cstdint>

#include "io/crc32c.h"

namespace mixprec::io {

namespace {

void append_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

}  // namespace

void append_tfrecord(std::string& out, std::string_view data) {
  out.reserve(out.size() + data.size() + kTFRecordOverhead);
  const std::size_t length_at = out.size();
  append_le(out, data.size(), 8);
  const std::string_view length_bytes(out.data() + length_at, 8);
  append_le(out, mask_crc32c(crc32c(length_bytes)), 4);
  out.append(data);
  append_le(out, mask_crc32c(crc32c(data)), 4);
}

}  // namespace mixprec::io
