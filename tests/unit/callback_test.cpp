// The callback machinery of fit() and evaluate(): hook order and counts, the logs each hook sees,
// stop_training, initial_epoch, steps_per_epoch, History and the progress bar as callbacks, and
// Logs itself.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using testing::blobs;
using testing::tiny_model;

// Records every hook as a line ("epoch_begin 0", "batch_end 0.3", ...) and the logs it saw.
struct Recorder : callbacks::Callback {
  std::vector<std::string> events;
  std::vector<callbacks::Logs::Values> epoch_logs;
  std::vector<callbacks::Logs::Values> batch_logs;
  callbacks::TrainingParams seen_params;
  int current_epoch = -1;

  void on_train_begin(const callbacks::Logs&) override {
    events.push_back("train_begin");
    seen_params = params();
  }
  void on_train_end(const callbacks::Logs&) override { events.push_back("train_end"); }
  void on_epoch_begin(int epoch, const callbacks::Logs&) override {
    current_epoch = epoch;
    events.push_back("epoch_begin " + std::to_string(epoch));
  }
  void on_epoch_end(int epoch, const callbacks::Logs& logs) override {
    events.push_back("epoch_end " + std::to_string(epoch));
    epoch_logs.push_back(logs.values());
  }
  void on_train_batch_begin(std::int64_t batch, const callbacks::Logs&) override {
    events.push_back("batch_begin " + std::to_string(current_epoch) + "." + std::to_string(batch));
  }
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs) override {
    events.push_back("batch_end " + std::to_string(current_epoch) + "." + std::to_string(batch));
    batch_logs.push_back(logs.values());
  }
  void on_test_begin(const callbacks::Logs&) override { events.push_back("test_begin"); }
  void on_test_end(const callbacks::Logs&) override { events.push_back("test_end"); }
};

bool has(const callbacks::Logs::Values& v, const std::string& name) {
  for (const auto& [k, value] : v) {
    if (k == name) return true;
  }
  return false;
}

double value_of(const callbacks::Logs::Values& v, const std::string& name) {
  for (const auto& [k, value] : v) {
    if (k == name) return value;
  }
  ADD_FAILURE() << "no log " << name;
  return 0.0;
}

TEST(CallbackTest, HooksRunInKerasOrderWithTheirCounts) {
  const auto data = blobs(40, 1);
  Model model = tiny_model(3);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .metrics = {"accuracy"}});
  auto rec = std::make_shared<Recorder>();
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 2,
             .verbose = Verbosity::silent,
             .validation_split = 0.2,
             .callbacks = {rec}});
  // 32 training samples in batches of 16: two batches per epoch, then the validation pass.
  const std::vector<std::string> expected = {
      "train_begin",     "epoch_begin 0", "batch_begin 0.0", "batch_end 0.0", "batch_begin 0.1",
      "batch_end 0.1",   "test_begin",    "test_end",        "epoch_end 0",   "epoch_begin 1",
      "batch_begin 1.0", "batch_end 1.0", "batch_begin 1.1", "batch_end 1.1", "test_begin",
      "test_end",        "epoch_end 1",   "train_end"};
  EXPECT_EQ(rec->events, expected);
  EXPECT_EQ(rec->seen_params.epochs, 2);
  EXPECT_EQ(rec->seen_params.steps, 2);
  EXPECT_FALSE(rec->has_model());  // detached when fit() returns
}

TEST(CallbackTest, LogsCarryMetricsLearningRateAndTimings) {
  const auto data = blobs(48, 2);
  Model model = tiny_model(4);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.05}), .metrics = {"accuracy"}});
  auto rec = std::make_shared<Recorder>();
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 1,
                               .verbose = Verbosity::silent,
                               .validation_split = 0.25,
                               .callbacks = {rec}});
  ASSERT_EQ(rec->epoch_logs.size(), 1u);
  const auto& logs = rec->epoch_logs[0];
  for (const char* name : {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate",
                           "step_ms", "samples_per_s", "epoch_seconds"}) {
    EXPECT_TRUE(has(logs, name)) << name;
  }
  EXPECT_FALSE(has(logs, "loss_scale"));  // no LossScaleOptimizer under float32
  EXPECT_DOUBLE_EQ(value_of(logs, "learning_rate"), 0.05);
  EXPECT_DOUBLE_EQ(value_of(logs, "loss"), h.history.at("loss").at(0));
  EXPECT_DOUBLE_EQ(value_of(logs, "val_accuracy"), h.history.at("val_accuracy").at(0));
  // History keeps the metrics only, as Keras's history.history.
  EXPECT_EQ(h.history.count("learning_rate"), 0u);
  EXPECT_EQ(h.history.count("step_ms"), 0u);
  ASSERT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(h.epochs[0].step_ms.size(), 3u);  // 36 samples, batches of 16
  // The batch logs are the running metrics after each batch.
  ASSERT_EQ(rec->batch_logs.size(), 3u);
  EXPECT_TRUE(has(rec->batch_logs[0], "loss"));
  EXPECT_DOUBLE_EQ(value_of(rec->batch_logs[2], "loss"), value_of(logs, "loss"));
}

TEST(CallbackTest, MixedFloat16LogsCarryTheLossScale) {
  testing::PolicyGuard guard("mixed_float16");
  const auto data = blobs(32, 3);
  Model model = tiny_model(5);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.05})});
  auto rec = std::make_shared<Recorder>();
  const History h =
      model.fit(data.x, data.y,
                {.batch_size = 16, .epochs = 1, .verbose = Verbosity::silent, .callbacks = {rec}});
  ASSERT_EQ(rec->batch_logs.size(), 2u);
  EXPECT_DOUBLE_EQ(value_of(rec->batch_logs[1], "loss_scale"), 32768.0);
  EXPECT_DOUBLE_EQ(value_of(rec->batch_logs[1], "skipped_steps"), 0.0);
  ASSERT_TRUE(h.epochs[0].loss_scale.has_value());
  EXPECT_DOUBLE_EQ(*h.epochs[0].loss_scale, 32768.0);
}

struct StopAfter : callbacks::Callback {
  std::int64_t after_batch;
  explicit StopAfter(std::int64_t b) : after_batch(b) {}
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs&) override {
    if (batch == after_batch) model().set_stop_training(true);
  }
};

TEST(CallbackTest, StopTrainingEndsFitAfterTheCurrentBatch) {
  const auto data = blobs(64, 4);
  Model model = tiny_model(6);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  auto rec = std::make_shared<Recorder>();
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 5,
                               .verbose = Verbosity::silent,
                               .callbacks = {StopAfter(1), rec}});
  EXPECT_EQ(h.epochs.size(), 1u);  // the epoch still ends (on_epoch_end runs), then training
  EXPECT_EQ(rec->batch_logs.size(), 2u);
  EXPECT_EQ(model.optimizer().iterations(), 2);
  EXPECT_EQ(rec->events.back(), "train_end");
  // The next fit() starts with the flag cleared.
  model.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = Verbosity::silent});
  EXPECT_EQ(model.optimizer().iterations(), 6);
}

TEST(CallbackTest, InitialEpochAndStepsPerEpoch) {
  const auto data = blobs(64, 5);
  Model model = tiny_model(7);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  auto rec = std::make_shared<Recorder>();
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 4,
                               .verbose = Verbosity::silent,
                               .callbacks = {rec},
                               .initial_epoch = 2,
                               .steps_per_epoch = 3});
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[0].epoch, 3);  // epochs 2 and 3, shown from 1: 3/4 and 4/4
  EXPECT_EQ(h.epochs[1].epoch, 4);
  EXPECT_EQ(rec->events[1], "epoch_begin 2");
  EXPECT_EQ(rec->batch_logs.size(), 6u);
  EXPECT_EQ(model.optimizer().iterations(), 6);
  EXPECT_THROW(model.fit(data.x, data.y, {.verbose = Verbosity::silent, .steps_per_epoch = 3}),
               ValueError);  // 64 / 32 = 2 batches only
  EXPECT_THROW(model.fit(data.x, data.y, {.verbose = Verbosity::silent, .initial_epoch = -1}),
               ValueError);
}

TEST(CallbackTest, EvaluateCallsTheTestHooks) {
  const auto data = blobs(30, 6);
  Model model = tiny_model(8);
  model.compile({.metrics = {"accuracy"}});
  auto rec = std::make_shared<Recorder>();
  const Scores s = model.evaluate(
      data.x, data.y, {.batch_size = 8, .verbose = Verbosity::silent, .callbacks = {rec}});
  const std::vector<std::string> expected = {"test_begin", "test_end"};
  EXPECT_EQ(rec->events, expected);
  EXPECT_GT(s[0], 0.0);
}

TEST(CallbackTest, ProgressOutputIsACallback) {
  const auto data = blobs(32, 7);
  Model model = tiny_model(9);
  model.compile({.metrics = {"accuracy"}});
  std::ostringstream out;
  auto bar = std::make_shared<callbacks::ProgbarLogger>(
      callbacks::ProgressBarOptions{.style = callbacks::ProgressStyle::line, .stream = &out});
  model.fit(data.x, data.y,
            {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent, .callbacks = {bar}});
  const std::string text = out.str();
  EXPECT_NE(text.find("Epoch 1/2 - 2/2"), std::string::npos) << text;
  EXPECT_NE(text.find("Epoch 2/2 - 2/2"), std::string::npos) << text;
  EXPECT_NE(text.find("loss: "), std::string::npos) << text;
  EXPECT_LT(text.find("loss: "), text.find("accuracy: ")) << "metrics in compile order: " << text;
  EXPECT_EQ(text.find("learning_rate"), std::string::npos) << text;
}

TEST(CallbackTest, LogsAreLazyAndComputedOnce) {
  int calls = 0;
  const callbacks::Logs logs = callbacks::Logs::lazy([&calls] {
    ++calls;
    return callbacks::Logs::Values{{"loss", 0.5}, {"accuracy", 0.75}};
  });
  EXPECT_EQ(calls, 0);
  const callbacks::Logs copy = logs;
  EXPECT_DOUBLE_EQ(copy.at("accuracy"), 0.75);
  EXPECT_DOUBLE_EQ(logs.at("loss"), 0.5);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(logs.get("val_loss").has_value());
  try {
    (void)logs.at("val_loss");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("loss, accuracy"), std::string::npos) << e.what();
  }
}

TEST(CallbackTest, ModelIsOnlyReachableDuringFit) {
  Recorder r;
  EXPECT_THROW((void)r.model(), ValueError);
  EXPECT_THROW(callbacks::CallbackRef(std::shared_ptr<Recorder>()), ValueError);
}

}  // namespace
}  // namespace mixprec
