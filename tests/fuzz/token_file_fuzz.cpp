// libFuzzer target: a token file (token_file.h) must be read or refused with a mixprec::Error,
// through the path reader (open, header against the file size, pread, token check) and through
// the in-memory parser and checker; what is read must satisfy the header's promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "fuzz_file.h"
#include "mixprec/data/token_file.h"
#include "mixprec/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = mixprec::data;
  const auto path = mixprec::fuzz::write_input(data, size, "input.tok");
  try {
    const std::vector<std::int32_t> tokens = d::read_token_file(path.string(), 1 << 20);
    const d::TokenFileInfo info = d::read_token_file_info(path.string());
    if (static_cast<std::int64_t>(tokens.size()) != info.tokens) std::abort();
    for (std::int32_t t : tokens) {
      if (t < 0 || t >= info.vocab_size) std::abort();
    }
  } catch (const mixprec::Error&) {
  }
  try {
    const std::span<const std::uint8_t> bytes(data, size);
    const d::TokenFileInfo info = d::parse_token_file_header(bytes, "input");
    d::check_token_file_tokens(bytes, info, "input");
  } catch (const mixprec::Error&) {
  }
  return 0;
}
