// Token files inside the library: the header parser and token check shared by the reader, the
// public parse functions and TokenDataset's mapping, and the opened file with its checked header.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/data/token_file.h"

namespace mixprec::data::detail {

// The header in `header` (`available` bytes of it could be read) against a file of `file_size`
// bytes; DataError naming `name` (token_file.h lists the checks).
TokenFileInfo parse_token_header(const std::uint8_t* header, std::uint64_t available,
                                 std::uint64_t file_size, const std::string& name);
// Every token of `tokens` (info.tokens little-endian uint16 values) below info.vocab_size.
void check_tokens(const std::uint8_t* tokens, const TokenFileInfo& info, const std::string& name);

// A token file opened read-only with its header checked against its size. The caller closes fd.
struct OpenTokenFile {
  int fd = -1;
  std::uint64_t file_size = 0;
  TokenFileInfo info;
};
OpenTokenFile open_token_file(const std::string& path);

}  // namespace mixprec::data::detail
