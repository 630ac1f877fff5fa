// libFuzzer target: GPT-2's pre-tokenization and BPE on arbitrary bytes (invalid UTF-8 included)
// with a small fixed vocabulary: the pieces must be non-empty and concatenate to the input, and
// decode(encode(input)) must give the input back. Nothing may throw.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/tokenizer.h"

namespace {

const mixprec::data::Gpt2Tokenizer& tokenizer() {
  static const mixprec::data::Gpt2Tokenizer tok = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
    // " t" + "he" -> " the"; "a" + "a" -> "aa"; "aa" + "aa" -> "aaaa"; "\xc3" + "\xa9" -> "é".
    for (const char* s : {" t", "he", " the", "aa", "aaaa", "\xc3\xa9", "<|endoftext|>"}) {
      t.emplace_back(s);
    }
    std::vector<mixprec::data::Gpt2Merge> merges = {{' ', 't', 256}, {'h', 'e', 257},
                                                    {256, 257, 258}, {'a', 'a', 259},
                                                    {259, 259, 260}, {0xc3, 0xa9, 261}};
    return mixprec::data::Gpt2Tokenizer(std::move(t), std::move(merges));
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string joined;
  for (std::string_view piece : mixprec::data::gpt2_pretokenize(text)) {
    if (piece.empty()) std::abort();
    joined += piece;
  }
  if (joined != text) std::abort();
  if (tokenizer().decode(tokenizer().encode(text)) != text) std::abort();
  return 0;
}
