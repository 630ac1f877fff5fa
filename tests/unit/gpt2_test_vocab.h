// A small GPT-2 vocabulary for the tokenizer tests, written as GPT-2's files: ids 0..255 are the
// single bytes (id = byte value), 256 + r the result of merge r below, 270 "<|endoftext|>".
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/data/tokenizer.h"

namespace mixprec::data::gpt2_test {

// The merges in rank order, as bytes (' ' is the space byte, shown as U+0120 in the file).
inline std::vector<std::pair<std::string, std::string>> test_merges() {
  return {{" ", "t"}, {"h", "e"},   {" t", "he"},  {"l", "l"},    {"e", "ll"},
          {"b", "c"}, {"a", "b"},   {"a", "a"},    {"aa", "aa"},  {" ", "w"},
          {"o", "r"}, {" w", "or"}, {" wor", "l"}, {" worl", "d"}};
}

inline std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// Bytes as GPT-2's characters, UTF-8.
inline std::string chars(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += utf8(gpt2_byte_to_char(b));
  return out;
}

// (key as GPT-2 characters, the JSON value as written) in id order.
using Entries = std::vector<std::pair<std::string, std::string>>;

inline Entries test_entries() {
  Entries e;
  for (int b = 0; b < 256; ++b) {
    e.emplace_back(chars(std::string(1, static_cast<char>(b))), std::to_string(b));
  }
  int id = 256;
  for (const auto& [l, r] : test_merges()) e.emplace_back(chars(l + r), std::to_string(id++));
  e.emplace_back("<|endoftext|>", std::to_string(id));
  return e;
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

inline std::string encoder_json(const Entries& entries) {
  std::string out = "{";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ", ";
    out += json_string(entries[i].first) + ": " + entries[i].second;
  }
  return out + "}";
}

inline std::string vocab_bpe(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::string out = "#version: 0.2\n";
  for (const auto& [l, r] : merges) out += chars(l) + " " + chars(r) + "\n";
  return out;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace mixprec::data::gpt2_test
