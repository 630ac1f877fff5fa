// Readers of GPT-2's encoder.json (a streaming JSON parse: no document tree, every entry checked
// as it arrives) and vocab.bpe (line by line), with the byte <-> character table they share.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "data/gpt2_pretokenize.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

// GPT-2's bytes_to_unicode(): the printable bytes stand for themselves, the 68 others get
// U+0100.. in byte order. Built once; kCharCount covers the largest code point (U+0143).
constexpr std::size_t kCharCount = 0x144;

struct ByteTable {
  char32_t to_char[256] = {};
  std::int16_t to_byte[kCharCount] = {};  // -1: not a GPT-2 byte character
  ByteTable() {
    for (std::int16_t& b : to_byte) b = -1;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

// At most this many bytes of an entry in a message, non-printable bytes as \xNN.
std::string shown(std::string_view s) {
  constexpr std::size_t kShown = 48;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + (s.size() > kShown ? "'..." : "'");
}

// "U+0120"
std::string code_point(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return buf;
}

// The bytes a string of GPT-2 byte characters (UTF-8) stands for; nullopt when a character is
// not one of them (or the UTF-8 is invalid).
std::optional<std::string> chars_to_bytes(std::string_view utf8) {
  std::string bytes;
  for (std::size_t at = 0; at < utf8.size();) {
    const detail::Utf8Char c = detail::decode_utf8(utf8, at);
    if (!c.valid || c.code >= kCharCount || table().to_byte[c.code] < 0) return std::nullopt;
    bytes += static_cast<char>(static_cast<unsigned char>(table().to_byte[c.code]));
    at += c.length;
  }
  return bytes;
}

std::string read_bounded(const std::string& path, const char* what) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    throw DataError(std::string(what) + " '" + path + "': cannot read it: " + ec.message() +
                    "; give the path of GPT-2's " + what);
  }
  if (size > static_cast<std::uintmax_t>(kGpt2MaxFileBytes)) {
    throw DataError(std::string(what) + " '" + path + "': " + std::to_string(size) +
                    " bytes is more than the limit of " + std::to_string(kGpt2MaxFileBytes) +
                    " (GPT-2's is about 1 MB); is this the right file?");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in && !in.eof()) {
    throw DataError(std::string(what) + " '" + path + "': reading failed: " + std::strerror(errno));
  }
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

// The SAX handler of encoder.json: one object of string -> whole number, nothing else. Returning
// false stops the parse; `error` then says why.
class EncoderHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string error;
  std::vector<std::optional<std::string>> tokens;  // by id
  std::unordered_map<std::string, std::int64_t> ids;
  std::int64_t entries = 0;

  bool start_object(std::size_t) override {
    if (depth_++ == 0 && !seen_object_) {
      seen_object_ = true;
      return true;
    }
    return fail("a nested object" + at_key());
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    has_key_ = true;
    return true;
  }
  bool number_unsigned(number_unsigned_t v) override { return entry(v); }
  bool number_integer(number_integer_t v) override {
    if (v < 0) return fail("the negative id " + std::to_string(v) + at_key());
    return entry(static_cast<std::uint64_t>(v));
  }
  bool number_float(number_float_t, const string_t& s) override {
    return fail("the id " + s + " (not a whole number)" + at_key());
  }
  bool null() override { return fail("null" + at_key()); }
  bool boolean(bool) override { return fail("a boolean" + at_key()); }
  bool string(string_t&) override { return fail("a string value" + at_key()); }
  bool binary(binary_t&) override { return fail("binary data" + at_key()); }
  bool start_array(std::size_t) override { return fail("an array" + at_key()); }
  bool end_array() override { return fail("an array" + at_key()); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return fail("invalid JSON at byte " + std::to_string(position) + " (" + e.what() + ")");
  }

 private:
  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  std::string at_key() const { return has_key_ ? " at key " + shown(key_) : ""; }

  bool entry(std::uint64_t id) {
    if (depth_ != 1) return fail("a number outside the top-level object");
    ++entries;
    if (entries > kGpt2MaxVocab) {
      return fail("more than " + std::to_string(kGpt2MaxVocab) +
                  " entries (token files hold 16-bit ids)");
    }
    if (id >= static_cast<std::uint64_t>(kGpt2MaxVocab)) {
      return fail("the id " + std::to_string(id) + " at key " + shown(key_) +
                  " is not below the limit of " + std::to_string(kGpt2MaxVocab));
    }
    if (key_.empty()) return fail("an empty key (id " + std::to_string(id) + ")");
    if (key_.size() > static_cast<std::size_t>(4 * kGpt2MaxTokenBytes)) {
      return fail("the key " + shown(key_) + " is longer than " +
                  std::to_string(kGpt2MaxTokenBytes) + " bytes");
    }
    std::optional<std::string> bytes = chars_to_bytes(key_);
    if (!bytes) {
      return fail("the key " + shown(key_) +
                  " holds a character that is not one of GPT-2's 256 byte characters");
    }
    if (bytes->size() > static_cast<std::size_t>(kGpt2MaxTokenBytes)) {
      return fail("the key " + shown(key_) + " is longer than " +
                  std::to_string(kGpt2MaxTokenBytes) + " bytes");
    }
    const auto [it, inserted] = ids.emplace(*bytes, static_cast<std::int64_t>(id));
    if (!inserted) return fail("the key " + shown(key_) + " appears twice");
    if (tokens.size() <= id) tokens.resize(id + 1);
    if (tokens[id]) {
      return fail("the id " + std::to_string(id) + " is given to two keys, " + shown(key_) +
                  " and another one");
    }
    tokens[id] = std::move(*bytes);
    has_key_ = false;
    return true;
  }

  int depth_ = 0;
  bool seen_object_ = false;
  std::string key_;
  bool has_key_ = false;
};

}  // namespace

char32_t gpt2_byte_to_char(std::uint8_t b) { return table().to_char[b]; }

std::vector<std::string> read_gpt2_encoder(const std::string& path) {
  const std::string text = read_bounded(path, "encoder.json");
  const std::string where = "encoder.json '" + path + "': ";
  EncoderHandler handler;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, &handler);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + "invalid JSON (" + e.what() + ")");
  }
  if (!ok || !handler.error.empty()) {
    throw DataError(where + (handler.error.empty() ? "invalid JSON" : handler.error) +
                    "; expected one object {\"token\": id, ...} as GPT-2's encoder.json");
  }
  if (handler.entries == 0) {
    throw DataError(where +
                    "no entries; expected one object {\"token\": id, ...} as GPT-2's "
                    "encoder.json");
  }
  std::vector<std::string> tokens;
  tokens.reserve(handler.tokens.size());
  for (std::size_t id = 0; id < handler.tokens.size(); ++id) {
    if (!handler.tokens[id]) {
      throw DataError(where + "no key has the id " + std::to_string(id) + " (the ids of " +
                      std::to_string(handler.entries) + " entries must be 0.." +
                      std::to_string(handler.entries - 1) + ", each once)");
    }
    tokens.push_back(std::move(*handler.tokens[id]));
  }
  for (int b = 0; b < 256; ++b) {
    if (!handler.ids.contains(std::string(1, static_cast<char>(b)))) {
      throw DataError(where + "the single-byte token of byte " + std::to_string(b) +
                      " (the character " + code_point(table().to_char[b]) +
                      ") is missing; a byte-level BPE needs all 256");
    }
  }
  if (!handler.ids.contains(kGpt2EndOfText)) {
    throw DataError(where + "the key \"" + std::string(kGpt2EndOfText) + "\" is missing");
  }
  return tokens;
}

std::vector<Gpt2Merge> read_gpt2_merges(const std::string& path,
                                        const std::vector<std::string>& tokens) {
  const std::string text = read_bounded(path, "vocab.bpe");
  std::unordered_map<std::string_view, std::int32_t> id_of;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    id_of.emplace(tokens[i], static_cast<std::int32_t>(i));
  }
  std::vector<Gpt2Merge> merges;
  std::unordered_set<std::uint64_t> pairs;
  std::size_t line_start = 0;
  for (std::int64_t line_no = 1; line_start < text.size(); ++line_no) {
    auto line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    std::string_view line(text.data() + line_start, line_end - line_start);
    line_start = line_end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    const std::string where = "vocab.bpe '" + path + "' line " + std::to_string(line_no) + ": ";
    const auto space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw DataError(where + shown(line) +
                      " is not a merge: expected two symbols separated by one space");
    }
    const std::optional<std::string> left = chars_to_bytes(line.substr(0, space));
    const std::optional<std::string> right = chars_to_bytes(line.substr(space + 1));
    if (!left || !right) {
      throw DataError(where + shown(line) +
                      " holds a character that is not one of GPT-2's 256 byte characters");
    }
    const auto l = id_of.find(*left), r = id_of.find(*right), m = id_of.find(*left + *right);
    if (l == id_of.end() || r == id_of.end() || m == id_of.end()) {
      throw DataError(where + "the merge " + shown(line) + " uses or makes a token (" +
                      shown(l == id_of.end()   ? *left
                            : r == id_of.end() ? *right
                                               : *left + *right) +
                      ") that is not in the encoder; are encoder.json and vocab.bpe of the same "
                      "model?");
    }
    const std::uint64_t pair =
        (static_cast<std::uint64_t>(l->second) << 32) | static_cast<std::uint32_t>(r->second);
    if (!pairs.insert(pair).second) {
      throw DataError(where + "the merge " + shown(line) + " appears twice");
    }
    merges.push_back({l->second, r->second, m->second});
  }
  return merges;
}

}  // namespace mixprec::data
