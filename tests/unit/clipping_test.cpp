// Gradient clipping (Keras semantics): clipvalue elementwise, clipnorm per tensor, global_clipnorm
// over all gradients; at most one of them. SGD with learning rate 1 makes the update equal to the
// clipped gradient, which the tests compute by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/optimizer_kernels.h"
#include "mixprec/mixprec.h"
#include "mixprec/optimizers.h"

namespace mixprec {
namespace {

using optimizers::SGD;

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

// The gradient the optimizer applied: w0 - w1 with lr = 1.
std::vector<double> applied(SGD opt, const std::vector<std::vector<double>>& grads) {
  std::vector<Tensor> vars, gs;
  for (const auto& g : grads) {
    vars.push_back(f32(std::vector<double>(g.size(), 0.0)));
    gs.push_back(f32(g));
  }
  opt.apply_gradients(gs, vars);
  std::vector<double> out;
  for (const Tensor& v : vars) {
    for (double x : v.to_vector<double>()) out.push_back(-x);
  }
  return out;
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6 * std::max(1.0, std::abs(expected[i]))) << i;
  }
}

TEST(ClippingTest, ClipValueIsElementwise) {
  expect_near(applied(SGD({.learning_rate = 1.0, .clipvalue = 1.0}), {{3.0, -0.5, -7.0, 0.25}}),
              {1.0, -0.5, -1.0, 0.25});
}

TEST(ClippingTest, ClipNormIsPerTensor) {
  // |(3, 4)| = 5 > 2: scaled by 2/5. |(0.6, 0.8)| = 1 <= 2: unchanged.
  expect_near(applied(SGD({.learning_rate = 1.0, .clipnorm = 2.0}), {{3.0, 4.0}, {0.6, 0.8}}),
              {1.2, 1.6, 0.6, 0.8});
}

TEST(ClippingTest, GlobalClipNormScalesAllGradientsTogether) {
  // Global norm sqrt(3^2 + 4^2 + 12^2) = 13 > 6.5: everything scaled by 1/2, also the tensor whose
  // own norm (5) is below the threshold.
  expect_near(
      applied(SGD({.learning_rate = 1.0, .global_clipnorm = 6.5}), {{3.0, 4.0}, {0.0, 12.0}}),
      {1.5, 2.0, 0.0, 6.0});
  // Below the threshold nothing changes.
  expect_near(
      applied(SGD({.learning_rate = 1.0, .global_clipnorm = 20.0}), {{3.0, 4.0}, {0.0, 12.0}}),
      {3.0, 4.0, 0.0, 12.0});
}

TEST(ClippingTest, UndefinedGradientsDoNotCountTowardsTheGlobalNorm) {
  Tensor a = f32({0.0, 0.0}), b = f32({0.0});
  SGD opt({.learning_rate = 1.0, .global_clipnorm = 2.5});
  opt.apply_gradients({f32({3.0, 4.0}), Tensor()}, {a, b});
  expect_near(a.to_vector<double>(), {-1.5, -2.0});
  EXPECT_EQ(b.item(), 0.0);
}

TEST(ClippingTest, ClipsHalfPrecisionGradientsAfterWidening) {
  Tensor w = f32({0.0, 0.0});
  SGD opt({.learning_rate = 1.0, .clipnorm = 1.0});
  opt.apply_gradients({f32({30.0, 40.0}).to(kFloat16)}, {w});
  expect_near(w.to_vector<double>(), {-0.6, -0.8});
}

TEST(ClippingTest, ClippingFeedsTheOptimizerState) {
  // Adam after one step stores m = (1 - beta_1) * clipped g.
  optimizers::Adam opt({.learning_rate = 0.1, .beta_1 = 0.5, .clipvalue = 0.5});
  Tensor w = f32({0.0, 0.0});
  opt.apply_gradients({f32({4.0, -0.25})}, {w});
  expect_near(opt.get_state().slots[0].value.to_vector<double>(), {0.25, -0.125});
}

TEST(ClippingTest, OnlyOneModePositiveAndFinite) {
  EXPECT_THROW(SGD({.clipnorm = 1.0, .clipvalue = 1.0}), ValueError);
  EXPECT_THROW(SGD({.clipnorm = 1.0, .global_clipnorm = 1.0}), ValueError);
  EXPECT_THROW(optimizers::RMSprop({.clipvalue = 0.0}), ValueError);
  EXPECT_THROW(optimizers::Adam({.global_clipnorm = -1.0}), ValueError);
  EXPECT_THROW(optimizers::AdamW({.clipnorm = INFINITY}), ValueError);
}

TEST(ClippingTest, SumOfSquaresIsAccurateAndDeterministic) {
  // Many blocks, run twice (the fixed block order makes the two bit-identical), against a long
  // double sum.
  const std::int64_t n = 300001;
  std::vector<float> x(static_cast<std::size_t>(n));
  long double expected = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(0.37 * i) * 3.0);
    expected +=
        static_cast<long double>(x[static_cast<std::size_t>(i)]) * x[static_cast<std::size_t>(i)];
  }
  const double first = cpu::sum_of_squares(x.data(), n);
  const double second = cpu::sum_of_squares(x.data(), n);
  EXPECT_EQ(first, second);
  EXPECT_NEAR(first, static_cast<double>(expected), 1e-12 * static_cast<double>(expected));
}

}  // namespace
}  // namespace mixprec
