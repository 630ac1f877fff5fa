// libFuzzer target: data::read_gpt2_merges on the input as vocab.bpe, against a fixed vocabulary
// (the 256 bytes as GPT-2 characters, then "ab", "abc", " t", "he", " the", "<|endoftext|>"), must
// return merges that join two tokens into the token of their bytes, or throw a mixprec::Error; the
// merges must then build a tokenizer whose decode inverts encode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_file.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"

namespace {

const std::vector<std::string>& vocabulary() {
  static const std::vector<std::string> tokens = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"ab", "abc", " t", "he", " the", "<|endoftext|>"}) t.emplace_back(s);
    return t;
  }();
  return tokens;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = mixprec::data;
  const auto path = mixprec::fuzz::write_input(data, size, "vocab.bpe");
  try {
    std::vector<d::Gpt2Merge> merges = d::read_gpt2_merges(path.string(), vocabulary());
    const auto& v = vocabulary();
    for (const d::Gpt2Merge& m : merges) {
      if (v.at(static_cast<std::size_t>(m.merged)) !=
          v.at(static_cast<std::size_t>(m.left)) + v.at(static_cast<std::size_t>(m.right))) {
        std::abort();
      }
    }
    const d::Gpt2Tokenizer tok(v, std::move(merges));
    const std::string text = "abc the\xc3\xa9 ab";
    if (tok.decode(tok.encode(text)) != text) std::abort();
  } catch (const mixprec::Error&) {
  }
  return 0;
}
