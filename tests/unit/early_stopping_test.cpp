// callbacks::EarlyStopping: patience, min_delta, mode, baseline, start_from_epoch and
// restore_best_weights, driven with chosen logs, and once inside fit().
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using callbacks::EarlyStopping;
using callbacks::Logs;

// Feeds `values` of `name` as epoch logs; returns the epoch at which stop_training was set (-1).
int run(EarlyStopping& es, Model& model, const char* name, const std::vector<double>& values) {
  es.set_model(&model);
  model.set_stop_training(false);
  es.on_train_begin({});
  for (int e = 0; e < static_cast<int>(values.size()); ++e) {
    es.on_epoch_end(e, Logs({{name, values[static_cast<std::size_t>(e)]}}));
    if (model.stop_training()) return e;
  }
  return -1;
}

TEST(EarlyStoppingTest, StopsAfterPatienceEpochsWithoutImprovement) {
  Model model = testing::tiny_model(1);
  EarlyStopping es({.patience = 2});
  // Best at epoch 1 (0.8); epochs 2 and 3 do not improve: stop at 3.
  EXPECT_EQ(run(es, model, "val_loss", {1.0, 0.8, 0.9, 0.85, 0.1}), 3);
  EXPECT_EQ(es.stopped_epoch(), 3);
  EXPECT_EQ(es.best_epoch(), 1);
  EXPECT_DOUBLE_EQ(*es.best(), 0.8);
}

TEST(EarlyStoppingTest, MinDeltaAndModes) {
  Model model = testing::tiny_model(1);
  EarlyStopping small({.monitor = "loss", .min_delta = 0.05, .patience = 1});
  // 0.97 and 0.96 are within min_delta of 1.0: no improvement, stop at epoch 1.
  EXPECT_EQ(run(small, model, "loss", {1.0, 0.97, 0.96}), 1);
  // "val_accuracy" is maximised under the automatic mode.
  EarlyStopping acc({.monitor = "val_accuracy", .patience = 1});
  EXPECT_EQ(run(acc, model, "val_accuracy", {0.5, 0.6, 0.7, 0.65}), 3);
  EarlyStopping forced_min(
      {.monitor = "val_accuracy", .patience = 1, .mode = callbacks::MonitorMode::min});
  EXPECT_EQ(run(forced_min, model, "val_accuracy", {0.5, 0.6}), 1);
}

TEST(EarlyStoppingTest, BaselineAndStartFromEpoch) {
  Model model = testing::tiny_model(1);
  EarlyStopping baseline({.monitor = "loss", .patience = 2, .baseline = 0.5});
  // Never below the baseline: stops once patience runs out.
  EXPECT_EQ(run(baseline, model, "loss", {0.9, 0.8, 0.7, 0.6}), 1);
  EarlyStopping late({.monitor = "loss", .patience = 0, .start_from_epoch = 3});
  EXPECT_EQ(run(late, model, "loss", {1.0, 2.0, 3.0, 4.0, 5.0}), 4);
  EXPECT_THROW(EarlyStopping({.patience = -1}), ValueError);
  EXPECT_THROW(EarlyStopping({.monitor = ""}), ValueError);
}

TEST(EarlyStoppingTest, MissingMonitorIsSkippedNotAnError) {
  Model model = testing::tiny_model(1);
  EarlyStopping es({.patience = 0});
  EXPECT_EQ(run(es, model, "loss", {1.0, 2.0, 3.0}), -1);  // monitors val_loss
}

// The one warning for a missing monitor names the logs there are, so a typo shows its fix.
TEST(EarlyStoppingTest, MissingMonitorWarningListsTheAvailableLogs) {
  Model model = testing::tiny_model(1);
  std::vector<std::string> warnings;
  LogHandler previous = set_log_handler([&](LogLevel level, std::string_view message) {
    if (level == LogLevel::warning) warnings.emplace_back(message);
  });
  EarlyStopping es({.monitor = "val_acuracy", .patience = 0});
  es.set_model(&model);
  es.on_train_begin({});
  es.on_epoch_end(0, Logs({{"loss", 0.5}, {"accuracy", 0.8}, {"val_accuracy", 0.7}}));
  es.on_epoch_end(1, Logs({{"loss", 0.4}, {"accuracy", 0.9}, {"val_accuracy", 0.8}}));
  set_log_handler(previous);
  ASSERT_EQ(warnings.size(), 1u);  // once, as Keras
  EXPECT_NE(warnings[0].find("'val_acuracy'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("loss, accuracy, val_accuracy"), std::string::npos) << warnings[0];
}

TEST(EarlyStoppingTest, InFitRestoresTheBestWeights) {
  const auto data = testing::blobs(48, 2);
  Model model = testing::tiny_model(3);
  // learning rate 0: the loss never improves after the first epoch; patience 2 stops at epoch 2.
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.0})});
  auto es = std::make_shared<EarlyStopping>(
      callbacks::EarlyStoppingOptions{.monitor = "loss", .patience = 2});
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 10,
                               .verbose = Verbosity::silent,
                               .shuffle = false,
                               .callbacks = {es}});
  EXPECT_EQ(h.epochs.size(), 3u);
  EXPECT_EQ(es->stopped_epoch(), 2);

  // restore_best_weights: train with a real rate, then check the weights are those at the end of
  // the best epoch, recorded by a second callback.
  struct Snapshot : callbacks::Callback {
    std::vector<std::vector<Tensor>> weights;
    void on_epoch_end(int, const Logs&) override { weights.push_back(model().get_weights()); }
  };
  Model m2 = testing::tiny_model(4);
  m2.compile({.optimizer = optimizers::SGD({.learning_rate = 0.5})});
  auto snap = std::make_shared<Snapshot>();
  auto best = std::make_shared<EarlyStopping>(callbacks::EarlyStoppingOptions{
      .monitor = "loss", .patience = 100, .restore_best_weights = true});
  m2.fit(data.x, data.y,
         {.batch_size = 16, .epochs = 4, .verbose = Verbosity::silent, .callbacks = {snap, best}});
  ASSERT_GE(best->best_epoch(), 0);
  const std::vector<Tensor> now = m2.get_weights();
  const auto& expected = snap->weights.at(static_cast<std::size_t>(best->best_epoch()));
  ASSERT_EQ(now.size(), expected.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_EQ(now[i].to_vector<float>(), expected[i].to_vector<float>()) << i;
  }
}

}  // namespace
}  // namespace mixprec
