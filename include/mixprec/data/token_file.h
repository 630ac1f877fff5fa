// Token files (.tok): a tokenized corpus, read memory-mapped by data::TokenDataset
// (token_dataset.h) and written by `mixprec tokenize`.
//
//   offset  size  field
//   0       8     magic "MPTOKENS"
//   8       4     version, little-endian uint32: 1
//   12      4     vocab size V, little-endian uint32, in [1, 65536]
//   16      8     token count N, little-endian uint64
//   24      2*N   the tokens, little-endian uint16, each < V
//
// The file is exactly 24 + 2*N bytes. A reader checks the header and the file size before it
// trusts N for anything (an allocation, a mapping), then every token against V; a bad file is a
// DataError naming the file and the problem (the index of the first token >= V).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mixprec/data/idx.h"  // DataError

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

inline constexpr char kTokenFileMagic[8] = {'M', 'P', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr std::uint32_t kTokenFileVersion = 1;
inline constexpr std::int64_t kTokenFileHeaderBytes = 24;
inline constexpr std::int64_t kTokenFileMaxVocab = 65536;  // ids fit uint16

struct TokenFileInfo {
  std::int64_t vocab_size = 0;
  std::int64_t tokens = 0;
};

// The header, checked against the file's size (not the tokens). DataError for a missing or
// unreadable file, a file shorter than the header, a wrong magic, an unknown version, a vocab size
// outside [1, 65536], or a size other than 24 + 2*N (truncated, or trailing bytes).
TokenFileInfo read_token_file_info(const std::string& path);

// The header's checks on bytes in memory (`bytes` is the whole file); `name` names it in errors.
TokenFileInfo parse_token_file_header(std::span<const std::uint8_t> bytes, const std::string& name);
// Every token of a file held in `bytes` (already checked by parse_token_file_header) below the
// vocab size; DataError naming the first token index that is not.
void check_token_file_tokens(std::span<const std::uint8_t> bytes, const TokenFileInfo& info,
                             const std::string& name);

// The whole file's tokens, after every check above. At most max_tokens (a DataError above: the
// file is larger than the caller expects; TokenDataset maps instead of reading).
std::vector<std::int32_t> read_token_file(const std::string& path,
                                          std::int64_t max_tokens = std::int64_t{1} << 28);

// Writes `tokens` with vocab size `vocab_size` atomically (a temporary file renamed over `path`:
// a reader sees the old file or the whole new one). ValueError for a vocab size outside
// [1, 65536] or a token outside [0, vocab_size) (naming its index), before anything is written;
// IOError when writing fails.
void write_token_file(const std::string& path, std::span<const std::int32_t> tokens,
                      std::int64_t vocab_size);

}  // namespace mixprec::data

#pragma GCC visibility pop
