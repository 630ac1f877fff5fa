// keras.callbacks.ProgbarLogger: the progress output of fit() and evaluate() as a callback (a
// ProgressBar, include/mixprec/callbacks/progress_bar.h). fit() adds one unless verbose is silent.
//
// Shown per epoch: the metrics, loss_scale, skipped_steps (when > 0) and, at the end, the
// validation metrics; the other extras of the logs (learning_rate, timings) are not shown. During
// fit() the validation pass prints nothing; evaluate() shows its own pass.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/progress_bar.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(ProgressBarOptions options = {});

  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_test_begin(const Logs& logs) override;
  void on_test_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_test_end(const Logs& logs) override;
  // Ends a drawn bar with a newline (fit/evaluate call it when an exception leaves them).
  void interrupt();

  // The values a bar shows for `logs` (public for tests).
  static std::vector<ProgressValue> shown_values(const Logs& logs);

 private:
  ProgressBar bar_;
  bool in_fit_ = false;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
