// Nesting bounds for outside JSON (json_limits.h).
#include "io/json_limits.h"

#include <algorithm>

namespace mixprec::io {

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string json_depth_problem(std::string_view text, std::size_t limit) {
  if (json_nesting_depth(text, limit) <= limit) return "";
  return "nests arrays and objects more than " + std::to_string(limit) + " deep";
}

}  // namespace mixprec::io
