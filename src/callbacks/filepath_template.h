// Keras-style file name templates of ModelCheckpoint: "ckpt/model-{epoch:02d}-{val_loss:.4f}".
// A field is {name} or {name:spec}; spec is a printf-like width/precision and one of d, f, e, g
// (Python's format mini-language, the part file names use). {epoch} is the 1-based epoch, {batch}
// the 1-based batch within it; any other name is a log.
#pragma once

#include <string>

#include "mixprec/callbacks/callback.h"

namespace mixprec::callbacks::detail {

// ValueError naming the template for an unknown field, a bad spec or an unbalanced brace.
std::string format_filepath(const std::string& pattern, int epoch, std::int64_t batch,
                            const Logs& logs);
// Checks the syntax only (construction time), without values.
void check_filepath_template(const std::string& pattern);

}  // namespace mixprec::callbacks::detail
