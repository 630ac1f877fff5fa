// models::CallbackList (src/models/callback_list.h).
#include "models/callback_list.h"

#include "mixprec/models/model.h"

namespace mixprec::models {

CallbackList::CallbackList(Model& model, const std::vector<callbacks::CallbackRef>& user,
                           Verbosity verbose, bool with_history,
                           const callbacks::TrainingParams& params)
    : keep_(user), params_(params) {
  params_.verbose = static_cast<int>(verbose);
  if (verbose == Verbosity::progress_bar || verbose == Verbosity::one_line_per_epoch) {
    progbar_ = std::make_shared<callbacks::ProgbarLogger>(callbacks::ProgressBarOptions{
        .style = verbose == Verbosity::progress_bar ? callbacks::ProgressStyle::bar
                                                    : callbacks::ProgressStyle::line});
    all_.push_back(progbar_.get());
  }
  for (const callbacks::CallbackRef& c : keep_) all_.push_back(c.get());
  if (with_history) {
    history_ = std::make_shared<callbacks::History>();
    all_.push_back(history_.get());
  }
  for (callbacks::Callback* c : all_) {
    c->set_model(&model);
    c->set_params(params_);
  }
}

CallbackList::~CallbackList() {
  for (callbacks::Callback* c : all_) c->set_model(nullptr);
}

void CallbackList::set_steps(std::int64_t steps) {
  callbacks::TrainingParams p = params_;
  p.steps = steps;
  for (callbacks::Callback* c : all_) c->set_params(p);
}

void CallbackList::on_train_begin(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_train_begin(logs);
}
void CallbackList::on_train_end(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_train_end(logs);
}
void CallbackList::on_epoch_begin(int epoch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_epoch_begin(epoch, logs);
}
void CallbackList::on_epoch_end(int epoch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_epoch_end(epoch, logs);
}
void CallbackList::on_train_batch_begin(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_train_batch_begin(batch, logs);
}
void CallbackList::on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_train_batch_end(batch, logs);
}
void CallbackList::on_test_begin(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_test_begin(logs);
}
void CallbackList::on_test_batch_begin(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_test_batch_begin(batch, logs);
}
void CallbackList::on_test_batch_end(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_test_batch_end(batch, logs);
}
void CallbackList::on_test_end(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_test_end(logs);
}

void CallbackList::on_predict_begin(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_predict_begin(logs);
}
void CallbackList::on_predict_batch_begin(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_predict_batch_begin(batch, logs);
}
void CallbackList::on_predict_batch_end(std::int64_t batch, const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_predict_batch_end(batch, logs);
}
void CallbackList::on_predict_end(const callbacks::Logs& logs) {
  for (callbacks::Callback* c : all_) c->on_predict_end(logs);
}

void CallbackList::interrupt() noexcept {
  if (progbar_) progbar_->interrupt();
}

}  // namespace mixprec::models
