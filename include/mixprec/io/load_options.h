// What the loaders of stored weights accept beyond a well-formed file (Model::load_weights,
// mixprec::load_model, io::load_checkpoint, callbacks::BackupAndRestore).
#pragma once

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct LoadOptions {
  // Weights (and a checkpoint's optimizer slots) holding NaN or Inf are refused by default: a
  // model that loads them evaluates to `loss: nan` without a word. IOError naming the tensor and
  // the count of bad values; true loads them anyway (to inspect a diverged run). The CLI's
  // --allow-nonfinite.
  bool allow_nonfinite = false;
};

}  // namespace mixprec

#pragma GCC visibility pop
