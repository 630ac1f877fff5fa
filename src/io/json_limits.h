// Bounds that every reader of outside JSON applies before anything walks the document: nlohmann's
// parser and destructor are iterative, but dump(), the copy constructor and every visitor recurse
// once per level, so a value nested a million deep (under any key, read or ignored) would overflow
// the stack. The depth is measured on the text, before parsing, so that no path can reach a deep
// value unchecked. Internal to the readers (safetensors, checkpoint, saved model, model and
// compile configs).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mixprec::io {

// The deepest nesting of arrays and objects in `text`, outside strings, counting stops once it
// passes `limit` (so the scan is linear and ends early on a hostile file).
std::size_t json_nesting_depth(std::string_view text, std::size_t limit);

// An error message part when `text` nests deeper than `limit` ("nests arrays and objects more
// than 40 deep"), "" when it does not.
std::string json_depth_problem(std::string_view text, std::size_t limit);

}  // namespace mixprec::io
