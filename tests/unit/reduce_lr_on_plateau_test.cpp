// callbacks::ReduceLROnPlateau: patience, factor, min_lr, cooldown, and its refusal of a schedule.
#include <gtest/gtest.h>

#include <vector>

#include "mixprec/mixprec.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using callbacks::Logs;
using callbacks::ReduceLROnPlateau;

// The learning rate after each epoch's logs.
std::vector<double> rates(ReduceLROnPlateau& cb, Model& model, const std::vector<double>& losses) {
  cb.set_model(&model);
  cb.on_train_begin({});
  std::vector<double> out;
  for (int e = 0; e < static_cast<int>(losses.size()); ++e) {
    cb.on_epoch_end(e, Logs({{"val_loss", losses[static_cast<std::size_t>(e)]}}));
    out.push_back(model.optimizer().learning_rate());
  }
  return out;
}

TEST(ReduceLROnPlateauTest, ReducesAfterPatienceDownToMinLr) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 1.0})});
  ReduceLROnPlateau cb({.factor = 0.5, .patience = 2, .min_lr = 0.2});
  const std::vector<double> got = rates(cb, model, {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0});
  const std::vector<double> expected = {1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2};
  EXPECT_EQ(got, expected);
}

TEST(ReduceLROnPlateauTest, CooldownAndImprovement) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 1.0})});
  ReduceLROnPlateau cb({.factor = 0.1, .patience = 1, .cooldown = 2});
  // Keras's counting: epoch 1 does not improve: reduce, cooldown 2. Epoch 2 counts the cooldown
  // down to 1 and cannot reduce; epoch 3 counts it to 0 and, still no better, reduces again;
  // epoch 4 is in the new cooldown; epoch 5 improves.
  const std::vector<double> got = rates(cb, model, {1.0, 1.0, 1.0, 1.0, 1.0, 0.5});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_DOUBLE_EQ(got[0], 1.0);
  EXPECT_DOUBLE_EQ(got[1], 0.1);
  EXPECT_DOUBLE_EQ(got[2], 0.1);
  EXPECT_NEAR(got[3], 0.01, 1e-12);
  EXPECT_NEAR(got[4], 0.01, 1e-12);
  EXPECT_NEAR(got[5], 0.01, 1e-12);  // improved: no reduction
}

TEST(ReduceLROnPlateauTest, RefusesAScheduleAndBadOptions) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD(
                     {.learning_rate = optimizers::schedules::ExponentialDecay{
                          .initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5}})});
  ReduceLROnPlateau cb({.patience = 0});
  cb.set_model(&model);
  cb.on_train_begin({});
  cb.on_epoch_end(0, Logs({{"val_loss", 1.0}}));
  EXPECT_THROW(cb.on_epoch_end(1, Logs({{"val_loss", 1.0}})), ValueError);
  EXPECT_THROW(ReduceLROnPlateau({.factor = 1.0}), ValueError);
  EXPECT_THROW(ReduceLROnPlateau({.cooldown = -1}), ValueError);
}

TEST(ReduceLROnPlateauTest, WorksThroughALossScaleOptimizerInFit) {
  const auto data = testing::blobs(32, 3);
  Model model = testing::tiny_model(2);
  model.compile(
      {.optimizer = mixed_precision::LossScaleOptimizer(optimizers::SGD({.learning_rate = 0.0}))});
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 3,
             .verbose = Verbosity::silent,
             .callbacks = {ReduceLROnPlateau({.monitor = "loss", .factor = 0.5, .patience = 1})}});
  // lr 0 never improves the loss, but 0 is at min_lr already: it stays 0.
  EXPECT_DOUBLE_EQ(model.optimizer().learning_rate(), 0.0);
  model.compile(
      {.optimizer = mixed_precision::LossScaleOptimizer(optimizers::SGD({.learning_rate = 1e-9}))});
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 3,
             .verbose = Verbosity::silent,
             .callbacks = {ReduceLROnPlateau(
                 {.monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 1.0})}});
  EXPECT_DOUBLE_EQ(model.optimizer().learning_rate(), 0.25e-9);
}

}  // namespace
}  // namespace mixprec
