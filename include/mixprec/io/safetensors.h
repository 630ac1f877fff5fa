// safetensors files (the Hugging Face format): an 8-byte little-endian header length N, N bytes of
// JSON {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"<key>": "<value>"}}, then the tensors' bytes, little-endian and row-major,
// packed without holes (offsets relative to the start of the data).
//
// dtypes: F64, F32, F16, BF16, I64, I32, U8, BOOL (mixprec's dtypes). A file with any other
// (I16, F8_E4M3, ...) is refused with an IOError naming it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::io {

using Metadata = std::map<std::string, std::string>;  // "__metadata__": string -> string

struct SafetensorsContents {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order (by data offset)
  Metadata metadata;
};

// Writes atomically (a temporary file in the same directory, fsync, rename, fsync of the
// directory). Names must be non-empty, unique and not "__metadata__" (ValueError); device tensors
// are copied to the host. The header is padded with spaces to a multiple of 8 bytes, as the
// Hugging Face library writes it. The metadata gets one more entry, "mixprec_crc32c": a CRC-32C
// of each tensor (its name, dtype, shape and bytes) and of the other metadata entries, which the
// readers verify (the key is reserved: ValueError when `metadata` has it). IOError when writing
// fails.
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const Metadata& metadata = {});

// Reads a file, validating everything before allocating tensor memory: the header length (at
// most 100 MB and within the file), well-formed JSON with no repeated names, known dtype names,
// non-negative dims whose byte size does not overflow and equals the entry's byte range, offsets
// in bounds, non-overlapping and covering the data exactly, a JSON header nested at most 8 deep;
// and when the file carries "mixprec_crc32c" (files written by save_safetensors), every tensor and
// the metadata against it ("tensor 'dense/kernel' does not match its checksum": the first that
// differs; the entry is not returned in `metadata`). Files without it (Hugging Face's, older
// ones) load unchecked. IOError "<path>: <problem>" otherwise.
SafetensorsContents load_safetensors(const std::filesystem::path& path);

// The same from bytes in memory (tests, fuzzing); `source` names them in errors.
SafetensorsContents parse_safetensors(std::span<const std::byte> bytes, std::string_view source);

// The 100 MB cap on the JSON header that both readers enforce.
inline constexpr std::size_t kMaxSafetensorsHeaderBytes = 100'000'000;

}  // namespace mixprec::io

#pragma GCC visibility pop
