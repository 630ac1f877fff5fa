// The byte tokenizer (one id per byte, end-of-text 256) and encode_documents.
#include <string>
#include <vector>

#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"

namespace mixprec::data {

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> tokens) const {
  std::string out;
  out.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int32_t t = tokens[i];
    if (t == kEndOfText) {
      out += kGpt2EndOfText;
    } else if (t >= 0 && t < 256) {
      out += static_cast<char>(static_cast<unsigned char>(t));
    } else {
      throw ValueError("ByteTokenizer::decode: token " + std::to_string(t) + " at position " +
                       std::to_string(i) +
                       " is outside [0, 257) (bytes 0..255, end-of-text 256); were the tokens "
                       "made by another tokenizer?");
    }
  }
  return out;
}

std::vector<std::int32_t> encode_documents(const Tokenizer& tokenizer,
                                           const std::vector<std::string>& documents) {
  std::vector<std::int32_t> ids;
  for (const std::string& doc : documents) {
    const std::vector<std::int32_t> part = tokenizer.encode(doc);
    ids.insert(ids.end(), part.begin(), part.end());
    ids.push_back(tokenizer.end_of_text());
  }
  return ids;
}

}  // namespace mixprec::data
