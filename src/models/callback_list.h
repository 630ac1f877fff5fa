// The callbacks of one fit() or evaluate() call, called in order (Keras's CallbackList): the
// progress bar first (when shown), then the user's callbacks, then fit()'s History. Attaches the
// model and the params on construction and detaches the model when destroyed, so a callback kept
// by the caller never points at a Model handle that has gone.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/history.h"
#include "mixprec/callbacks/progbar_logger.h"
#include "mixprec/models/training.h"

namespace mixprec {
class Model;
}

namespace mixprec::models {

class CallbackList {
 public:
  // `verbose` (resolved) decides the progress bar; `with_history` adds fit()'s History.
  CallbackList(Model& model, const std::vector<callbacks::CallbackRef>& user, Verbosity verbose,
               bool with_history, const callbacks::TrainingParams& params);
  ~CallbackList();
  CallbackList(const CallbackList&) = delete;
  CallbackList& operator=(const CallbackList&) = delete;

  void on_train_begin(const callbacks::Logs& logs);
  void on_train_end(const callbacks::Logs& logs);
  void on_epoch_begin(int epoch, const callbacks::Logs& logs);
  void on_epoch_end(int epoch, const callbacks::Logs& logs);
  void on_train_batch_begin(std::int64_t batch, const callbacks::Logs& logs);
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs);
  void on_test_begin(const callbacks::Logs& logs);
  void on_test_batch_begin(std::int64_t batch, const callbacks::Logs& logs);
  void on_test_batch_end(std::int64_t batch, const callbacks::Logs& logs);
  void on_test_end(const callbacks::Logs& logs);
  void on_predict_begin(const callbacks::Logs& logs);
  void on_predict_batch_begin(std::int64_t batch, const callbacks::Logs& logs);
  void on_predict_batch_end(std::int64_t batch, const callbacks::Logs& logs);
  void on_predict_end(const callbacks::Logs& logs);

  // The params of an evaluation pass (its batch count) for the test hooks, then back.
  void set_steps(std::int64_t steps);
  // An exception is leaving fit()/evaluate(): end a drawn progress bar with a newline.
  void interrupt() noexcept;

  callbacks::History* history() const { return history_.get(); }
  bool empty() const { return all_.empty(); }

 private:
  std::vector<callbacks::Callback*> all_;     // call order
  std::vector<callbacks::CallbackRef> keep_;  // owns the user's callbacks during the call
  std::shared_ptr<callbacks::ProgbarLogger> progbar_;
  std::shared_ptr<callbacks::History> history_;
  callbacks::TrainingParams params_;
};

}  // namespace mixprec::models
