// callbacks::LearningRateScheduler: the rate each epoch trains with, and its errors.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

TEST(LearningRateSchedulerTest, SetsTheRateBeforeEachEpoch) {
  const auto data = testing::blobs(32, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.1})});
  struct Seen : callbacks::Callback {
    std::vector<double> rates;
    void on_train_batch_begin(std::int64_t, const callbacks::Logs&) override {
      rates.push_back(model().optimizer().learning_rate());
    }
  };
  auto seen = std::make_shared<Seen>();
  const History h =
      model.fit(data.x, data.y,
                {.batch_size = 32,
                 .epochs = 3,
                 .verbose = Verbosity::silent,
                 .callbacks = {callbacks::LearningRateScheduler([](int epoch, double lr) {
                                 return epoch == 0 ? lr : lr / 10.0;
                               }),
                               seen}});
  ASSERT_EQ(seen->rates.size(), 3u);
  EXPECT_DOUBLE_EQ(seen->rates[0], 0.1);
  EXPECT_DOUBLE_EQ(seen->rates[1], 0.01);
  EXPECT_DOUBLE_EQ(seen->rates[2], 0.001);
  ASSERT_EQ(h.epochs.size(), 3u);
}

TEST(LearningRateSchedulerTest, RejectsBadRatesAndSchedules) {
  const auto data = testing::blobs(16, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  EXPECT_THROW(callbacks::LearningRateScheduler(nullptr), ValueError);
  EXPECT_THROW(
      model.fit(
          data.x, data.y,
          {.verbose = Verbosity::silent,
           .callbacks = {callbacks::LearningRateScheduler([](int, double) { return -1.0; })}}),
      ValueError);
  model.compile({.optimizer = optimizers::SGD(
                     {.learning_rate = optimizers::schedules::ExponentialDecay{
                          .initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5}})});
  EXPECT_THROW(
      model.fit(
          data.x, data.y,
          {.verbose = Verbosity::silent,
           .callbacks = {callbacks::LearningRateScheduler([](int, double lr) { return lr; })}}),
      ValueError);
}

}  // namespace
}  // namespace mixprec
