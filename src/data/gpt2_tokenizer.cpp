// GPT-2's byte-level BPE on token ids: a piece starts as its bytes' single-byte tokens, and the
// adjacent pair of lowest rank is merged everywhere in the piece, left to right, as GPT-2's
// encoder.py bpe() does on strings (the ids of equal strings are equal, so the result is the same).
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& encoder_json, const std::string& vocab_bpe) {
  std::vector<std::string> tokens = read_gpt2_encoder(encoder_json);
  std::vector<Gpt2Merge> merges = read_gpt2_merges(vocab_bpe, tokens);
  init(std::move(tokens), std::move(merges));
}

Gpt2Tokenizer::Gpt2Tokenizer(std::vector<std::string> tokens, std::vector<Gpt2Merge> merges) {
  init(std::move(tokens), std::move(merges));
}

// The checks of both constructors (the file readers have made most of them already, with the
// file's line or key in the message).
void Gpt2Tokenizer::init(std::vector<std::string> tokens, std::vector<Gpt2Merge> merges) {
  tokens_ = std::move(tokens);
  const char* where = "Gpt2Tokenizer: ";
  const auto n = static_cast<std::int64_t>(tokens_.size());
  if (n > kGpt2MaxVocab) {
    throw DataError(std::string(where) + std::to_string(n) + " tokens is more than the limit of " +
                    std::to_string(kGpt2MaxVocab) + " (token files hold 16-bit ids)");
  }
  std::unordered_map<std::string_view, std::int32_t> id_of;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string& t = tokens_[static_cast<std::size_t>(i)];
    if (t.empty() || t.size() > static_cast<std::size_t>(kGpt2MaxTokenBytes)) {
      throw DataError(std::string(where) + "token " + std::to_string(i) + " has " +
                      std::to_string(t.size()) + " bytes; expected 1.." +
                      std::to_string(kGpt2MaxTokenBytes));
    }
    if (!id_of.emplace(t, static_cast<std::int32_t>(i)).second) {
      throw DataError(std::string(where) + "tokens " + std::to_string(id_of[t]) + " and " +
                      std::to_string(i) + " have the same bytes");
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      throw DataError(std::string(where) + "no token holds the single byte " + std::to_string(b) +
                      "; a byte-level BPE needs all 256");
    }
    byte_token_[b] = it->second;
  }
  const auto eot = id_of.find(kGpt2EndOfText);
  if (eot == id_of.end()) {
    throw DataError(std::string(where) + "no token is \"" + kGpt2EndOfText + "\"");
  }
  end_of_text_ = eot->second;
  ranks_.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const Gpt2Merge& m = merges[r];
    const auto valid = [n](std::int32_t id) { return id >= 0 && id < n; };
    if (!valid(m.left) || !valid(m.right) || !valid(m.merged) ||
        tokens_[m.merged] != tokens_[m.left] + tokens_[m.right]) {
      throw DataError(std::string(where) + "merge " + std::to_string(r) + " (" +
                      std::to_string(m.left) + ", " + std::to_string(m.right) + " -> " +
                      std::to_string(m.merged) +
                      ") does not join two tokens into the token of their bytes");
    }
    if (r > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) ||
        !ranks_.emplace(pair_key(m.left, m.right), Rank{static_cast<std::int32_t>(r), m.merged})
             .second) {
      throw DataError(std::string(where) + "merge " + std::to_string(r) +
                      " repeats an earlier pair");
    }
  }
}

const std::string& Gpt2Tokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw ValueError("Gpt2Tokenizer: token " + std::to_string(id) + " is outside [0, " +
                     std::to_string(vocab_size()) + ")");
  }
  return tokens_[static_cast<std::size_t>(id)];
}

std::vector<std::int32_t> Gpt2Tokenizer::encode_piece(std::string_view piece) const {
  std::vector<std::int32_t> word(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) {
    word[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  }
  std::vector<std::int32_t> next;
  while (word.size() > 1) {
    // The adjacent pair of lowest rank; all its occurrences are merged in this pass.
    const Rank* best = nullptr;
    std::int32_t first = 0, second = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks_.find(pair_key(word[i], word[i + 1]));
      if (it != ranks_.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second;
        first = word[i];
        second = word[i + 1];
      }
    }
    if (best == nullptr) break;
    next.clear();
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        next.push_back(best->merged);
        i += 2;
      } else {
        next.push_back(word[i]);
        i += 1;
      }
    }
    word.swap(next);
  }
  return word;
}

std::vector<std::int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  // Repeated pieces (" the", ",") are merged once per call. The views point into `text`.
  std::unordered_map<std::string_view, std::vector<std::int32_t>> cache;
  for (const std::string_view piece : gpt2_pretokenize(text)) {
    auto it = cache.find(piece);
    if (it == cache.end()) it = cache.emplace(piece, encode_piece(piece)).first;
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const std::int32_t> tokens) const {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int32_t t = tokens[i];
    if (t < 0 || t >= vocab_size()) {
      throw ValueError("Gpt2Tokenizer::decode: token " + std::to_string(t) + " at position " +
                       std::to_string(i) + " is outside [0, " + std::to_string(vocab_size()) +
                       "); were the tokens made with another vocabulary?");
    }
    out += tokens_[static_cast<std::size_t>(t)];
  }
  return out;
}

}  // namespace mixprec::data
