// GPT-2's pre-tokenization, written by hand (no regex engine): UTF-8 decoding and the character
// classes its pattern uses,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// The classes, an APPROXIMATION of Unicode's outside ASCII (full tables would be ~100 KB):
//  - whitespace (\s): '\t' '\n' '\v' '\f' '\r' ' ' and the other White_Space code points
//    (U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000);
//  - digits (\p{N}): '0'..'9'; superscripts and fractions of Latin-1 (U+00B2, U+00B3, U+00B9,
//    U+00BC..U+00BE); the decimal digits of Arabic, Extended Arabic, Devanagari, Bengali,
//    Thai and the full-width forms; super/subscript digits (U+2070..U+2079 except the letters
//    U+2071 and U+207F, U+2080..U+2089); number forms U+2150..U+2189; enclosed numbers
//    U+2460..U+249B, U+24EA..U+24FF, U+2776..U+2793; U+3007 and U+3021..U+3029;
//  - other: every other ASCII character that is not a letter; Latin-1 punctuation and symbols
//    U+00A1..U+00BF except the letters U+00AA, U+00B5, U+00BA and the numbers above; U+00D7,
//    U+00F7; combining marks U+0300..U+036F, U+0483..U+0489, U+0591..U+05BD, U+0610..U+061A,
//    U+064B..U+065F, U+0900..U+0903, U+093A..U+094F, U+1AB0..U+1AFF, U+1DC0..U+1DFF,
//    U+20D0..U+20FF, U+FE20..U+FE2F; the blocks of punctuation and symbols U+2010..U+206F (the
//    spaces above excepted), U+20A0..U+20CF, U+2190..U+245F, U+2500..U+2775, U+2794..U+2BFF,
//    U+2E00..U+2E7F, U+3001..U+3004, U+3008..U+3020, U+3030, U+FE10..U+FE1F, U+FE30..U+FE4F,
//    U+FF01..U+FF0F, U+FF1A..U+FF20, U+FF3B..U+FF40, U+FF5B..U+FF65, U+FFF0..U+FFFF,
//    U+1F000..U+1FAFF (emoji and pictographs); the general-punctuation and private-use areas
//    U+E000..U+F8FF; and a byte that does not start valid UTF-8 (it is one character);
//  - letters (\p{L}): 'A'..'Z', 'a'..'z', and every other code point.
// So Latin, Greek, Cyrillic, CJK and most other letters, their punctuation in the common blocks,
// and digits in the common scripts match the pattern; rarer digits, marks and symbols may be
// classed as letters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mixprec::data::detail {

enum class CharClass : std::uint8_t { letter, digit, space, other };

CharClass classify(char32_t code);

// One character of UTF-8 text: its code point and byte length (1..4). A byte that does not start
// a valid, shortest-form sequence of a scalar value (no surrogates, at most U+10FFFF) is a
// character of length 1 with valid = false.
struct Utf8Char {
  char32_t code = 0;
  std::uint8_t length = 1;
  bool valid = true;
};
Utf8Char decode_utf8(std::string_view text, std::size_t at);

}  // namespace mixprec::data::detail
