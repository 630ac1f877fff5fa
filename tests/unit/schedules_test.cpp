// Learning-rate schedules against the Keras formulas evaluated here, and their use by optimizers
// (evaluated at the iteration count before each step).
#include "mixprec/optimizers/schedules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/optimizers.h"

namespace mixprec {
namespace {

using namespace optimizers::schedules;

TEST(SchedulesTest, ConstantSchedule) {
  const ConstantSchedule s{.learning_rate = 0.25};
  for (std::int64_t step : {0, 1, 1000}) EXPECT_DOUBLE_EQ(s(step), 0.25);
}

TEST(SchedulesTest, ExponentialDecaySmooth) {
  const ExponentialDecay s{.initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5};
  for (std::int64_t step : {0, 1, 5, 10, 15, 37}) {
    EXPECT_NEAR(s(step), 0.1 * std::pow(0.5, step / 10.0), 1e-15) << step;
  }
}

TEST(SchedulesTest, ExponentialDecayStaircase) {
  const ExponentialDecay s{
      .initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5, .staircase = true};
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(9), 0.1);
  EXPECT_DOUBLE_EQ(s(10), 0.05);
  EXPECT_DOUBLE_EQ(s(19), 0.05);
  EXPECT_DOUBLE_EQ(s(35), 0.0125);
}

TEST(SchedulesTest, CosineDecay) {
  const CosineDecay s{.initial_learning_rate = 0.2, .decay_steps = 100, .alpha = 0.1};
  const auto expected = [](double step) {
    const double t = std::min(step, 100.0) / 100.0;
    return 0.2 * (0.9 * 0.5 * (1.0 + std::cos(std::numbers::pi * t)) + 0.1);
  };
  for (std::int64_t step : {0, 1, 25, 50, 99, 100, 250}) {
    EXPECT_NEAR(s(step), expected(static_cast<double>(step)), 1e-15) << step;
  }
  EXPECT_NEAR(s(50), 0.2 * (0.45 + 0.1), 1e-15);
  EXPECT_NEAR(s(1000), 0.2 * 0.1, 1e-15);  // holds alpha * initial after decay_steps
}

TEST(SchedulesTest, InvalidSchedulesThrowWhenGivenToAnOptimizer) {
  EXPECT_THROW(optimizers::SGD({.learning_rate = ExponentialDecay{.initial_learning_rate = 0.1,
                                                                  .decay_steps = 0,
                                                                  .decay_rate = 0.5}}),
               ValueError);
  EXPECT_THROW(optimizers::Adam({.learning_rate = CosineDecay{.initial_learning_rate = 0.1}}),
               ValueError);
  EXPECT_THROW(optimizers::SGD({.learning_rate = [](std::int64_t) { return -1.0; }}), ValueError);
}

TEST(SchedulesTest, OptimizerEvaluatesTheScheduleAtItsIterationCount) {
  const ExponentialDecay schedule{
      .initial_learning_rate = 0.5, .decay_steps = 2, .decay_rate = 0.25};
  optimizers::SGD opt({.learning_rate = schedule});
  Tensor w = from_vector(std::vector<double>{1.0}, {1});
  double expected = 1.0;
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(opt.learning_rate(), 0.5 * std::pow(0.25, k / 2.0), 1e-15) << k;
    opt.apply_gradients({from_vector(std::vector<double>{1.0}, {1})}, {w});
    expected -= 0.5 * std::pow(0.25, k / 2.0);  // the first step uses step 0
  }
  EXPECT_NEAR(w.item(), expected, 1e-6);
}

TEST(SchedulesTest, CustomCallableAndSetLearningRate) {
  optimizers::SGD opt({.learning_rate = [](std::int64_t step) { return 1.0 / (1.0 + step); }});
  Tensor w = from_vector(std::vector<double>{0.0}, {1});
  const Tensor g = from_vector(std::vector<double>{1.0}, {1});
  opt.apply_gradients({g}, {w});  // lr 1
  opt.apply_gradients({g}, {w});  // lr 1/2
  EXPECT_NEAR(w.item(), -1.5, 1e-7);
  opt.set_learning_rate(0.125);
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.125);
  opt.apply_gradients({g}, {w});
  EXPECT_NEAR(w.item(), -1.625, 1e-7);
}

}  // namespace
}  // namespace mixprec
