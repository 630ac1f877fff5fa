// The checksums mixprec writes into a safetensors file's __metadata__ (key kChecksumKey), so that
// a flipped bit anywhere in a checkpoint or a weights file is an error on load rather than a
// silently different model:
//
//   "__metadata__": {"format": "...", "mixprec_crc32c":
//                    "{\"__metadata__\":\"1a2b3c4d\",\"dense/kernel\":\"5e6f7081\",...}"}
//
// One CRC-32C (src/io/crc32c.h) per tensor, over its description (name, dtype code, shape) and
// then its bytes, and one over the other metadata entries (key and value, in key order), where a
// checkpoint keeps its JSON state (the loss scale, the counters, the position). Per tensor, so
// that a mismatch names the first tensor that differs. Files without the key (Hugging Face's,
// those written before it) load unchecked. Internal to src/io/safetensors.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "mixprec/io/safetensors.h"

namespace mixprec::io::detail {

inline constexpr const char* kChecksumKey = "mixprec_crc32c";
// The name the metadata's own checksum has in the table (no tensor may have it).
inline constexpr const char* kMetadataEntry = "__metadata__";

// The CRC-32C of a tensor's description: continue it over the tensor's bytes.
std::uint32_t tensor_description_crc(const std::string& name, const char* dtype_code,
                                     const Shape& shape);
// The CRC-32C of every metadata entry but kChecksumKey, in key order.
std::uint32_t metadata_crc(const Metadata& metadata);

// "1a2b3c4d".
std::string crc_text(std::uint32_t crc);

// Whether a metadata entry that is not kChecksumKey is one with a changed byte: its key within 3
// edits of kChecksumKey, or its value shaped like a table ({"...":"8 hex digits"...}).
bool looks_like_checksum_entry(std::string_view key, std::string_view value);

// The checksum table as the JSON text stored under kChecksumKey, and back. The parse returns
// nothing and sets `problem` for a value that is not a flat JSON object of 8-hex-digit strings.
std::string checksum_table_text(const std::map<std::string, std::uint32_t>& table);
std::optional<std::map<std::string, std::uint32_t>> parse_checksum_table(std::string_view text,
                                                                         std::string& problem);

}  // namespace mixprec::io::detail
