// keras.callbacks.TerminateOnNaN: stops fit() after the first batch whose loss is NaN or Inf.
//
// With loss scaling, a non-finite *gradient* is normal (the step is skipped and the scale halves);
// this callback watches the loss itself, which is computed in float32 before scaling: a NaN loss
// means the model has diverged, not that the scale is too high.
#pragma once

#include <cstdint>

#include "mixprec/callbacks/callback.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

class TerminateOnNaN : public Callback {
 public:
  // Reads the batch's loss (on a GPU: waits for the step; one synchronisation per batch).
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  bool terminated() const { return terminated_; }

 private:
  bool terminated_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
