// Deterministic mutations of a file's bytes for the readers' mutation tests (and a shared shape
// for the fuzz targets' seeds): bit flips, byte overwrites with boundary values, truncation,
// appended bytes, duplicated and deleted ranges, and 4/8-byte fields overwritten with large or
// small integers (the lengths and counts a reader must not trust).
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/random.h"

namespace mixprec::testing {

inline std::string mutate(const std::string& seed, Generator& g) {
  std::string s = seed;
  const int edits = 1 + static_cast<int>(g.below(3));
  for (int k = 0; k < edits; ++k) {
    const std::size_t n = s.size();
    const std::size_t at = n ? static_cast<std::size_t>(g.below(n)) : 0;
    switch (g.below(8)) {
      case 0:  // flip a bit
        if (n) s[at] = static_cast<char>(s[at] ^ (1 << g.below(8)));
        break;
      case 1: {  // a boundary byte
        const char values[] = {0,
                               1,
                               0x7f,
                               static_cast<char>(0x80),
                               static_cast<char>(0xff),
                               '"',
                               '{',
                               '}',
                               '[',
                               ']',
                               ',',
                               ':',
                               '-',
                               '9'};
        if (n) s[at] = values[g.below(sizeof values)];
        break;
      }
      case 2:  // truncate
        s.resize(n ? static_cast<std::size_t>(g.below(n)) : 0);
        break;
      case 3:  // append
        for (std::uint64_t i = 0, m = 1 + g.below(16); i < m; ++i) {
          s += static_cast<char>(g.below(256));
        }
        break;
      case 4:  // duplicate a range
        if (n) s.insert(at, s.substr(at, static_cast<std::size_t>(g.below(32))));
        break;
      case 5:  // delete a range
        if (n) s.erase(at, static_cast<std::size_t>(1 + g.below(16)));
        break;
      case 6:    // a 4-byte field
      case 7: {  // an 8-byte field
        const std::size_t width = g.below(8) < 4 ? 4 : 8;
        const std::uint64_t values[] = {
            0, 1, 0x7fffffffull, 0xffffffffull, 0x80000000ull, ~0ull, 1ull << 40, g.next_u64()};
        const std::uint64_t v = values[g.below(8)];
        for (std::size_t i = 0; i < width && at + i < n; ++i) {
          s[at + i] = static_cast<char>((v >> (8 * (g.below(2) ? i : width - 1 - i))) & 0xff);
        }
        break;
      }
    }
  }
  return s;
}

}  // namespace mixprec::testing
