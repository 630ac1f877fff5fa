// Tokenizers for language models: text (bytes) <-> token ids (int32).
//
//   mp::data::ByteTokenizer bytes;                            // vocab 257: bytes + end-of-text
//   std::vector<std::int32_t> ids = bytes.encode("Hi!");      // {72, 105, 33}
//   std::string text = bytes.decode(ids);                     // "Hi!"
//
//   mp::data::Gpt2Tokenizer gpt2("encoder.json", "vocab.bpe"); // GPT-2's files: vocab 50257
//   gpt2.encode("Hello world");                               // {15496, 995}
//
// Both are exact: decode(encode(s)) == s for any bytes s. encode never produces the end-of-text
// id (a literal "<|endoftext|>" in the text is encoded as text); encode_documents() puts it after
// each document, as GPT-2's training data has it.
//
// GPT-2's byte-level BPE (Radford et al. 2019; the encoder.py of openai/gpt-2), written here:
//  - bytes <-> characters: each byte b is shown as one Unicode character in the files (the
//    printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF as themselves, the other 68 bytes as
//    U+0100, U+0101, ... in byte order); encoder.json's keys and vocab.bpe's symbols are strings
//    of those characters (UTF-8 in the files) and are turned back into bytes when read.
//  - pre-tokenization: the text is cut into pieces by GPT-2's pattern, tried in this order at
//    each position: the contractions 's 't 're 've 'm 'll 'd; an optional space and a run of
//    letters; an optional space and a run of digits; an optional space and a run of other
//    characters (neither whitespace, letter nor digit); a run of whitespace not followed by a
//    non-whitespace character (so "a   b" gives "a", "  ", " b"); a run of whitespace.
//    Characters are classified after decoding UTF-8: ASCII exactly as the pattern does; outside
//    ASCII an APPROXIMATION of Unicode's categories (documented in src/data/gpt2_pretokenize.h:
//    whitespace by the White_Space property, digits and number forms of the common scripts,
//    combining marks, punctuation and symbol blocks as "other", everything else a letter). A
//    byte that is not valid UTF-8 is one "other" character. Text in other scripts may therefore
//    be cut differently from Python's `regex` module at rare characters; the tokens still decode
//    to the same bytes.
//  - BPE: each piece starts as its bytes' single-byte tokens; the adjacent pair with the lowest
//    merge rank (its line in vocab.bpe) is merged everywhere in the piece, left to right, until no
//    adjacent pair has a rank.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mixprec/data/idx.h"  // DataError

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;          // "byte", "gpt2"
  virtual std::int64_t vocab_size() const = 0;   // ids are in [0, vocab_size)
  virtual std::int32_t end_of_text() const = 0;  // the id put between documents
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // The bytes of the tokens, concatenated; the end-of-text id decodes to "<|endoftext|>". A
  // ValueError naming the position for an id outside [0, vocab_size).
  virtual std::string decode(std::span<const std::int32_t> tokens) const = 0;
};

// Each document's tokens followed by the end-of-text id.
std::vector<std::int32_t> encode_documents(const Tokenizer& tokenizer,
                                           const std::vector<std::string>& documents);

// Bytes as tokens: id b for byte b (0..255), end-of-text 256; vocab_size 257.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr std::int32_t kEndOfText = 256;
  std::string name() const override { return "byte"; }
  std::int64_t vocab_size() const override { return 257; }
  std::int32_t end_of_text() const override { return kEndOfText; }
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> tokens) const override;
};

// ---- GPT-2's files ----

// Limits of the readers (a file or entry beyond them is refused before it is stored): GPT-2's
// encoder.json is ~1 MB with 50257 entries, vocab.bpe ~0.5 MB with 50000 merges, its longest
// token 128 bytes. Token ids must fit the uint16 token files (token_file.h): at most 65536.
inline constexpr std::int64_t kGpt2MaxFileBytes = std::int64_t{64} << 20;
inline constexpr std::int64_t kGpt2MaxVocab = 65536;
inline constexpr std::int64_t kGpt2MaxTokenBytes = 1024;
inline constexpr const char* kGpt2EndOfText = "<|endoftext|>";

// GPT-2's byte -> character table (see above): the code point that shows byte b.
char32_t gpt2_byte_to_char(std::uint8_t b);

// encoder.json: one JSON object {"token": id, ...}, the tokens in GPT-2's byte characters. Read
// with a streaming parser: anything else than an object of string keys and whole-number values
// (a nested value, a negative or fractional id) is refused at the key. The ids must be exactly
// 0..N-1, each once (N <= kGpt2MaxVocab); every key must be a non-empty string of GPT-2 byte
// characters, at most kGpt2MaxTokenBytes bytes, different from every other key; all 256
// single-byte tokens and "<|endoftext|>" must be present. Returns the tokens' bytes, indexed by
// id. DataError naming the file and the key (or the byte offset of a JSON syntax error).
std::vector<std::string> read_gpt2_encoder(const std::string& path);

// One merge of vocab.bpe: the ids of the pair and of the merged token (in the encoder).
struct Gpt2Merge {
  std::int32_t left = 0, right = 0, merged = 0;
};

// vocab.bpe: an optional first line "#version: ..." then one merge per line, "A B" (two symbols
// in GPT-2's byte characters, one space between), the rank being the merge's position (0 first);
// blank lines are skipped (the file ends with a newline). Each of A, B and AB must be a token of
// `tokens` (read_gpt2_encoder's result), and a pair may appear once. DataError naming the file and
// the line.
std::vector<Gpt2Merge> read_gpt2_merges(const std::string& path,
                                        const std::vector<std::string>& tokens);

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // Reads both files (DataError naming the file and the entry for a bad one).
  Gpt2Tokenizer(const std::string& encoder_json, const std::string& vocab_bpe);
  // From what the readers return, e.g. a vocabulary built in memory; the same checks.
  Gpt2Tokenizer(std::vector<std::string> tokens, std::vector<Gpt2Merge> merges);

  std::string name() const override { return "gpt2"; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(tokens_.size()); }
  std::int32_t end_of_text() const override { return end_of_text_; }
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> tokens) const override;

  // The bytes of token `id` (ValueError outside [0, vocab_size)).
  const std::string& token_bytes(std::int32_t id) const;
  // The ids of one pre-tokenized piece after the merges (no pre-tokenization).
  std::vector<std::int32_t> encode_piece(std::string_view piece) const;

 private:
  void init(std::vector<std::string> tokens, std::vector<Gpt2Merge> merges);

  struct Rank {
    std::int32_t rank = 0;
    std::int32_t merged = 0;
  };
  std::vector<std::string> tokens_;
  std::int32_t byte_token_[256] = {};
  // (left << 32 | right) -> rank and merged id
  std::unordered_map<std::uint64_t, Rank> ranks_;
  std::int32_t end_of_text_ = 0;
};

// The pieces GPT-2's pattern cuts `text` into (see above); their concatenation is `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace mixprec::data

#pragma GCC visibility pop
