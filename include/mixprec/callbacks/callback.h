// Callbacks (keras.callbacks.Callback): objects that fit() and evaluate() call at the start and
// end of training, of every epoch, of every training batch and of every evaluation.
//
//   struct StopAtLoss : mp::callbacks::Callback {
//     void on_epoch_end(int epoch, const mp::callbacks::Logs& logs) override {
//       if (logs.at("loss") < 0.1) model().set_stop_training(true);
//     }
//   };
//   model.fit(x, y, {.epochs = 20, .callbacks = {StopAtLoss{},
//   mp::callbacks::CSVLogger("log.csv")}});
//
// Epochs are numbered from 0 in the hooks, as in Keras (on_epoch_end(0, ...) ends the first
// epoch); batches from 0 within their epoch. The logs carry every metric by name ("loss",
// "accuracy", and at epoch end "val_loss", ...) plus "learning_rate" and, when the optimizer is a
// LossScaleOptimizer, "loss_scale" and "skipped_steps" (steps skipped so far in this epoch).
//
// Logs are read lazily: on a GPU, reading a value waits for the queued steps, so a callback that
// does not look at a batch's logs costs that batch nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {
class Model;
}

namespace mixprec::callbacks {

// The values a hook receives: (name, value) pairs in the order fit() produced them (the metrics in
// compile order, then the validation metrics, then the extras below). Either given outright or
// computed on first read by a provider (then cached).
class Logs {
 public:
  using Values = std::vector<std::pair<std::string, double>>;
  using Provider = std::function<Values()>;

  Logs() = default;
  Logs(Values values);                  // NOLINT: implicit, Logs{{"loss", 0.5}} reads naturally
  static Logs lazy(Provider provider);  // computed on the first read

  const Values& values() const;  // computes a lazy Logs
  bool contains(const std::string& name) const { return get(name).has_value(); }
  std::optional<double> get(const std::string& name) const;
  // ValueError listing the names present when `name` is absent.
  double at(const std::string& name) const;
  bool empty() const { return values().empty(); }
  Values::const_iterator begin() const { return values().begin(); }
  Values::const_iterator end() const { return values().end(); }

 private:
  struct Lazy {
    Provider provider;
    std::optional<Values> values;
  };
  std::shared_ptr<Lazy> lazy_;  // shared: copies of a lazy Logs compute once
  Values values_;
};

// The names fit() adds to the metrics in its logs. At batch and epoch end: learning_rate (the rate
// the next step uses), and with a LossScaleOptimizer loss_scale and skipped_steps (in this epoch).
// At epoch end also: epoch_seconds (wall time, validation included), step_ms (median step time)
// and samples_per_s (training samples over the summed step times).
namespace log_names {
inline constexpr const char* learning_rate = "learning_rate";
inline constexpr const char* loss_scale = "loss_scale";
inline constexpr const char* skipped_steps = "skipped_steps";
inline constexpr const char* epoch_seconds = "epoch_seconds";
inline constexpr const char* step_ms = "step_ms";
inline constexpr const char* samples_per_s = "samples_per_s";
}  // namespace log_names
// True for the names above: the logs that are not metrics (History keeps them out of
// history.history, as Keras does).
bool is_training_extra(const std::string& name);

// What fit()/evaluate() tells its callbacks before the first hook (Keras's callback.params).
struct TrainingParams {
  int epochs = 0;          // fit's `epochs` (the last epoch index + 1)
  int initial_epoch = 0;   // the first epoch index fit runs
  std::int64_t steps = 0;  // training batches per epoch (evaluate: batches of the pass)
  int verbose = 0;         // 0 silent, 1 progress bar, 2 one line per epoch
};

class Callback {
 public:
  virtual ~Callback() = default;

  // Set by fit()/evaluate() before on_train_begin/on_test_begin; model() throws ValueError when
  // the callback is not attached to a running fit()/evaluate().
  void set_model(Model* model) { model_ = model; }
  Model& model() const;
  bool has_model() const { return model_ != nullptr; }
  void set_params(const TrainingParams& params) { params_ = params; }
  const TrainingParams& params() const { return params_; }

  virtual void on_train_begin(const Logs& logs) { (void)logs; }
  virtual void on_train_end(const Logs& logs) { (void)logs; }
  virtual void on_epoch_begin(int epoch, const Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_epoch_end(int epoch, const Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) {
    (void)batch, (void)logs;
  }
  virtual void on_train_batch_end(std::int64_t batch, const Logs& logs) { (void)batch, (void)logs; }
  virtual void on_test_begin(const Logs& logs) { (void)logs; }
  virtual void on_test_end(const Logs& logs) { (void)logs; }
  virtual void on_test_batch_begin(std::int64_t batch, const Logs& logs) {
    (void)batch, (void)logs;
  }
  virtual void on_test_batch_end(std::int64_t batch, const Logs& logs) { (void)batch, (void)logs; }
  // predict(): its logs carry no values (Keras passes the outputs; Model::predict returns them).
  virtual void on_predict_begin(const Logs& logs) { (void)logs; }
  virtual void on_predict_end(const Logs& logs) { (void)logs; }
  virtual void on_predict_batch_begin(std::int64_t batch, const Logs& logs) {
    (void)batch, (void)logs;
  }
  virtual void on_predict_batch_end(std::int64_t batch, const Logs& logs) {
    (void)batch, (void)logs;
  }

 private:
  Model* model_ = nullptr;
  TrainingParams params_;
};

// One entry of FitOptions::callbacks: a callback object by value (copied in:
// `.callbacks = {mp::callbacks::EarlyStopping({.patience = 2})}`) or a shared_ptr to one that the
// caller keeps and can inspect after fit().
class CallbackRef {
 public:
  template <typename C>
  requires std::is_base_of_v<Callback, std::decay_t<C>> CallbackRef(C&& callback)  // NOLINT
      : ptr_(std::make_shared<std::decay_t<C>>(std::forward<C>(callback))) {}
  template <typename C>
  requires std::is_base_of_v<Callback, C> CallbackRef(std::shared_ptr<C> callback)  // NOLINT
      : ptr_(std::move(callback)) {
    if (!ptr_) throw_null();  // ValueError: a null shared_ptr
  }

  Callback& operator*() const { return *ptr_; }
  Callback* operator->() const { return ptr_.get(); }
  Callback* get() const { return ptr_.get(); }

 private:
  [[noreturn]] static void throw_null();
  std::shared_ptr<Callback> ptr_;
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
