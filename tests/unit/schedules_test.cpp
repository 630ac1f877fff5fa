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

TEST(SchedulesTest, CosineDecayWithWarmupFollowsKeras3) {
  // Keras 3: s = min(step, warmup_steps + decay_steps); below warmup_steps a line from
  // initial_learning_rate to warmup_target; then a cosine from warmup_target over decay_steps.
  const CosineDecay s{.initial_learning_rate = 0.0,
                      .decay_steps = 100,
                      .alpha = 0.1,
                      .warmup_target = 6e-4,
                      .warmup_steps = 10};
  // Values worked out by hand from the formula.
  EXPECT_DOUBLE_EQ(s(0), 0.0);
  EXPECT_DOUBLE_EQ(s(1), 6e-5);    // 6e-4 * 1/10
  EXPECT_DOUBLE_EQ(s(5), 3e-4);    // half way up
  EXPECT_DOUBLE_EQ(s(9), 5.4e-4);  // the last warm-up step
  EXPECT_DOUBLE_EQ(s(10), 6e-4);   // the cosine starts at the target: cos(0) = 1
  // 50 steps into the decay: cos(pi/2) = 0, so 6e-4 * (0.9 * 0.5 + 0.1) = 3.3e-4.
  EXPECT_NEAR(s(60), 3.3e-4, 1e-18);
  // 25 steps in: 0.5 (1 + cos(pi/4)) = 0.853553390593...; 6e-4 (0.9 * that + 0.1).
  EXPECT_NEAR(s(35), 6e-4 * (0.9 * 0.8535533905932737 + 0.1), 1e-18);
  EXPECT_NEAR(s(110), 6e-5, 1e-18);   // alpha * warmup_target at the end
  EXPECT_NEAR(s(5000), 6e-5, 1e-18);  // and held there
  // A non-zero start: the line goes from 1e-4 to 6e-4.
  const CosineDecay from{
      .initial_learning_rate = 1e-4, .decay_steps = 100, .warmup_target = 6e-4, .warmup_steps = 4};
  EXPECT_DOUBLE_EQ(from(0), 1e-4);
  EXPECT_DOUBLE_EQ(from(2), 3.5e-4);
  EXPECT_DOUBLE_EQ(from(4), 6e-4);
  // Without warmup_target, warmup_steps is ignored (Keras): the plain cosine from the initial rate.
  const CosineDecay plain{.initial_learning_rate = 0.2, .decay_steps = 100, .warmup_steps = 50};
  EXPECT_DOUBLE_EQ(plain(0), 0.2);
  EXPECT_NEAR(plain(50), 0.1, 1e-16);
  // warmup_target with warmup_steps 0: the cosine from the target.
  const CosineDecay no_steps{
      .initial_learning_rate = 0.2, .decay_steps = 100, .warmup_target = 0.4};
  EXPECT_DOUBLE_EQ(no_steps(0), 0.4);
  EXPECT_THROW(optimizers::AdamW({.learning_rate = CosineDecay{.initial_learning_rate = 0.0,
                                                               .decay_steps = 10,
                                                               .warmup_target = 1e-3,
                                                               .warmup_steps = -1}}),
               ValueError);
  // The optimizer uses it at its iteration count.
  optimizers::SGD opt({.learning_rate = s});
  Tensor w = from_vector(std::vector<double>{0.0}, {1}, {.dtype = kFloat32});
  for (int k = 0; k < 5; ++k) {
    EXPECT_DOUBLE_EQ(opt.learning_rate(), s(k));
    opt.apply_gradients({from_vector(std::vector<double>{1.0}, {1}, {.dtype = kFloat32})}, {w});
  }
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
