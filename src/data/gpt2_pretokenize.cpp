// GPT-2's pre-tokenization by hand: the text decoded into classified characters, then the
// pattern's alternatives tried in order at each position (see gpt2_pretokenize.h).
#include "data/gpt2_pretokenize.h"

#include <string_view>
#include <vector>

#include "mixprec/data/tokenizer.h"

namespace mixprec::data {

namespace detail {

namespace {

struct Range {
  char32_t first, last;
};

bool in(const Range* ranges, std::size_t n, char32_t c) {
  for (std::size_t i = 0; i < n; ++i) {
    if (c >= ranges[i].first && c <= ranges[i].last) return true;
  }
  return false;
}

// Unicode White_Space outside ASCII.
constexpr Range kSpace[] = {{0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

constexpr Range kDigit[] = {{0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x660, 0x669},
                            {0x6F0, 0x6F9},   {0x966, 0x96F},   {0x9E6, 0x9EF},   {0xE50, 0xE59},
                            {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2189},
                            {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},
                            {0x3021, 0x3029}, {0xFF10, 0xFF19}};

constexpr Range kOther[] = {{0xA1, 0xBF},     {0xD7, 0xD7},     {0xF7, 0xF7},      {0x300, 0x36F},
                            {0x483, 0x489},   {0x591, 0x5BD},   {0x610, 0x61A},    {0x64B, 0x65F},
                            {0x900, 0x903},   {0x93A, 0x94F},   {0x1AB0, 0x1AFF},  {0x1DC0, 0x1DFF},
                            {0x2010, 0x206F}, {0x20A0, 0x20CF}, {0x20D0, 0x20FF},  {0x2190, 0x245F},
                            {0x2500, 0x2775}, {0x2794, 0x2BFF}, {0x2E00, 0x2E7F},  {0x3001, 0x3004},
                            {0x3008, 0x3020}, {0x3030, 0x3030}, {0xE000, 0xF8FF},  {0xFE10, 0xFE2F},
                            {0xFE30, 0xFE4F}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20},  {0xFF3B, 0xFF40},
                            {0xFF5B, 0xFF65}, {0xFFF0, 0xFFFF}, {0x1F000, 0x1FAFF}};

constexpr std::size_t count(const auto& a) { return sizeof(a) / sizeof(a[0]); }

}  // namespace

CharClass classify(char32_t c) {
  if (c < 0x80) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) return CharClass::letter;
    if (c >= '0' && c <= '9') return CharClass::digit;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return CharClass::space;
    return CharClass::other;
  }
  // The order matters where the tables overlap: spaces and digits inside the "other" blocks
  // (U+2000..U+200A, U+00B2) are taken first; the letters inside U+00A1..U+00BF are excepted.
  if (in(kSpace, count(kSpace), c)) return CharClass::space;
  if (in(kDigit, count(kDigit), c)) return CharClass::digit;
  if (c == 0xAA || c == 0xB5 || c == 0xBA || c == 0x2071 || c == 0x207F) return CharClass::letter;
  if (in(kOther, count(kOther), c)) return CharClass::other;
  return CharClass::letter;
}

Utf8Char decode_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(at);
  if (b0 < 0x80) return {b0, 1, true};
  const Utf8Char invalid{b0, 1, false};
  int length = 0;
  char32_t code = 0;
  char32_t minimum = 0;  // the smallest code point that needs this length (no overlong forms)
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, code = b0 & 0x1F, minimum = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, code = b0 & 0x0F, minimum = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, code = b0 & 0x07, minimum = 0x10000;
  } else {
    return invalid;  // a continuation byte or 0xF8..0xFF
  }
  if (text.size() - at < static_cast<std::size_t>(length)) return invalid;
  for (int k = 1; k < length; ++k) {
    const unsigned char b = byte(at + static_cast<std::size_t>(k));
    if ((b & 0xC0) != 0x80) return invalid;
    code = (code << 6) | (b & 0x3F);
  }
  if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return invalid;
  return {code, static_cast<std::uint8_t>(length), true};
}

}  // namespace detail

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  using detail::CharClass;
  struct Char {
    std::size_t offset;
    CharClass cls;
    char32_t code;
  };
  std::vector<Char> chars;
  chars.reserve(text.size() + 1);
  for (std::size_t at = 0; at < text.size();) {
    const detail::Utf8Char c = detail::decode_utf8(text, at);
    chars.push_back({at, c.valid ? detail::classify(c.code) : CharClass::other, c.code});
    at += c.length;
  }
  const std::size_t n = chars.size();
  chars.push_back({text.size(), CharClass::other, 0});  // a sentinel: the end's offset
  const auto cls = [&](std::size_t i) { return chars[i].cls; };
  const auto code = [&](std::size_t i) { return i < n ? chars[i].code : char32_t{0}; };
  // The end of the run of class `c` starting at i.
  const auto run = [&](std::size_t i, CharClass c) {
    while (i < n && cls(i) == c) ++i;
    return i;
  };

  std::vector<std::string_view> pieces;
  std::size_t i = 0;
  while (i < n) {
    std::size_t end = i;
    // 's 't 're 've 'm 'll 'd (case-sensitive, as the pattern).
    if (code(i) == '\'') {
      const char32_t a = code(i + 1), b = code(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    if (end == i) {
      // An optional ' ' then a run of letters, digits or others: the space joins the run.
      const std::size_t start =
          code(i) == ' ' && i + 1 < n && cls(i + 1) != CharClass::space ? i + 1 : i;
      if (cls(start) != CharClass::space) {
        end = run(start, cls(start));
      } else {
        // Whitespace: the run, less its last character when a non-space follows the run
        // (\s+(?!\S)), unless that leaves nothing (then \s+ takes the one character).
        const std::size_t stop = run(i, CharClass::space);
        end = stop < n && stop - i >= 2 ? stop - 1 : stop;
      }
    }
    pieces.push_back(text.substr(chars[i].offset, chars[end].offset - chars[i].offset));
    i = end;
  }
  return pieces;
}

}  // namespace mixprec::data
