// What models.cpp needs from callbacks.cpp: Python callback lists as CallbackRefs, and the check
// that makes Ctrl-C stop fit() and evaluate() between steps.
#pragma once

#include <memory>
#include <vector>

#include "bindings.h"

namespace mixprec::python {

// The callbacks of a Python list (None: none); each gets `model` as its Keras self.model.
std::vector<callbacks::CallbackRef> to_callbacks(py::handle list, py::handle model);

// Runs the Python signal handlers at every batch end (with the GIL taken: a few hundred
// nanoseconds). When one raises (Ctrl-C: KeyboardInterrupt), fit() is told to stop after this
// step (the model stays consistent and usable) and evaluate() stops at once; rethrow() raises the
// exception once the call has returned and the GIL is back.
class InterruptCheck : public callbacks::Callback {
 public:
  void on_train_batch_end(std::int64_t, const callbacks::Logs&) override { check(true); }
  void on_test_batch_end(std::int64_t, const callbacks::Logs&) override { check(false); }
  void rethrow();

 private:
  void check(bool stop_training);
  std::shared_ptr<py::error_already_set> error_;
};

}  // namespace mixprec::python
