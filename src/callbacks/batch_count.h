// The count of training batches behind a "every N batches" frequency (ModelCheckpoint's and
// BackupAndRestore's save_freq, TensorBoard's update_freq) when fit() runs several batches per
// execution (CompileOptions::steps_per_execution): the batch hooks then fire once per execution,
// on_train_batch_begin with the index of its first batch and on_train_batch_end with the index of
// its last, and the execution counts every batch it ran. When the count reaches the frequency the
// callback acts and the count starts again from zero (Keras's rule: with 16 batches per execution
// and a frequency of 10, it acts after every execution). With one batch per execution this is
// every N-th batch.
#pragma once

#include <cstdint>

namespace mixprec::callbacks::detail {

// on_train_batch_begin: remembers where the execution starts.
inline void begin_batches(std::int64_t& begun, std::int64_t batch) { begun = batch; }

// on_train_batch_end: adds the execution's batches to `seen` (one when no begin was seen, as when
// a caller drives the hooks itself) and says whether `every` (> 0) is reached; `seen` then
// restarts from zero. `every` 0: never.
inline bool end_batches(std::int64_t every, std::int64_t& seen, std::int64_t& begun,
                        std::int64_t batch) {
  const std::int64_t ran = begun >= 0 && begun <= batch ? batch - begun + 1 : 1;
  begun = -1;
  if (every <= 0) return false;
  seen += ran;
  if (seen < every) return false;
  seen = 0;
  return true;
}

}  // namespace mixprec::callbacks::detail
