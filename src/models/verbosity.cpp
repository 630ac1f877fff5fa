// Verbosity (include/mixprec/models/training.h): Keras's verbose = 0, 1, 2 or "auto".
#include <string>

#include "mixprec/error.h"
#include "mixprec/models/training.h"

namespace mixprec {

namespace {

[[noreturn]] void bad_verbosity(const std::string& got) {
  throw ValueError(
      "verbose must be 0 (silent), 1 (progress bar), 2 (one line per epoch) or "
      "\"auto\" (1 on a terminal, else 2), got " +
      got);
}

}  // namespace

Verbosity::Verbosity(int level) : level_(level) {
  if (level < 0 || level > 2) bad_verbosity(std::to_string(level));
}

Verbosity::Verbosity(const char* name) : Verbosity(std::string(name != nullptr ? name : "")) {}

Verbosity::Verbosity(const std::string& name) {
  if (name == "auto") {
    level_ = -1;
  } else if (name == "0" || name == "1" || name == "2") {
    level_ = name[0] - '0';
  } else {
    bad_verbosity("\"" + name + "\"");
  }
}

}  // namespace mixprec
