// libFuzzer target: data::read_gpt2_encoder on the input as encoder.json must return a vocabulary
// that keeps its promises (ids 0..N-1 with distinct, non-empty tokens, every single byte present)
// or throw a mixprec::Error; a returned vocabulary must also build a tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "fuzz_file.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = mixprec::data;
  const auto path = mixprec::fuzz::write_input(data, size, "encoder.json");
  try {
    std::vector<std::string> tokens = d::read_gpt2_encoder(path.string());
    const std::set<std::string> distinct(tokens.begin(), tokens.end());
    if (distinct.size() != tokens.size() || tokens.size() < 257) std::abort();
    for (const std::string& t : tokens) {
      if (t.empty()) std::abort();
    }
    const d::Gpt2Tokenizer tok(std::move(tokens), {});
    if (tok.decode(tok.encode("fuzz \xff")) != "fuzz \xff") std::abort();
  } catch (const mixprec::Error&) {
  }
  return 0;
}
