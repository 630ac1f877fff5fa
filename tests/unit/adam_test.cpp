// Adam and AdamW against hand-written Keras reference loops in double. Hyperparameters are chosen
// so that every term matters (a large epsilon tells "epsilon hat" from the bias-corrected form,
// a large weight decay tells decoupled decay from none).
#include "mixprec/optimizers/adam.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using optimizers::Adam;
using optimizers::AdamW;

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

std::vector<double> gradient_at(int k, std::size_t n) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = static_cast<double>(static_cast<float>(std::cos(0.4 + 1.1 * i + 0.9 * k) * (0.5 + i)));
  }
  return g;
}

const std::vector<double> kStart = {0.5, -1.25, 2.0, 0.1, -0.75, 3.0};

struct Hyper {
  double lr, beta_1, beta_2, epsilon, weight_decay;
};

// Keras 3 Adam(W): t = k + 1; var -= var * wd * lr (AdamW); m += (g - m)(1 - b1);
// v += (g^2 - v)(1 - b2); var -= m * lr sqrt(1 - b2^t) / (1 - b1^t) / (sqrt(v) + eps).
std::vector<double> reference(const Hyper& h, int steps) {
  std::vector<double> w = kStart, m(w.size(), 0.0), v(w.size(), 0.0);
  for (int k = 0; k < steps; ++k) {
    const auto g = gradient_at(k, w.size());
    const double t = k + 1.0;
    const double alpha =
        h.lr * std::sqrt(1.0 - std::pow(h.beta_2, t)) / (1.0 - std::pow(h.beta_1, t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] -= w[i] * h.weight_decay * h.lr;
      m[i] += (g[i] - m[i]) * (1.0 - h.beta_1);
      v[i] += (g[i] * g[i] - v[i]) * (1.0 - h.beta_2);
      w[i] -= m[i] * alpha / (std::sqrt(v[i]) + h.epsilon);
    }
  }
  return w;
}

// The PyTorch-style form (epsilon added to the bias-corrected sqrt(v)), to show the test can tell.
std::vector<double> bias_corrected_epsilon(const Hyper& h, int steps) {
  std::vector<double> w = kStart, m(w.size(), 0.0), v(w.size(), 0.0);
  for (int k = 0; k < steps; ++k) {
    const auto g = gradient_at(k, w.size());
    const double t = k + 1.0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * (1.0 - h.beta_1);
      v[i] += (g[i] * g[i] - v[i]) * (1.0 - h.beta_2);
      const double m_hat = m[i] / (1.0 - std::pow(h.beta_1, t));
      const double v_hat = v[i] / (1.0 - std::pow(h.beta_2, t));
      w[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.epsilon);
    }
  }
  return w;
}

::testing::AssertionResult near(const Tensor& actual, const std::vector<double>& expected) {
  const std::vector<double> a = actual.to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - expected[i]) > 3e-6 * std::max(1.0, std::abs(expected[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs reference " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor run(optimizers::Optimizer opt, int steps) {
  Tensor w = f32(kStart);
  for (int k = 0; k < steps; ++k) opt.apply_gradients({f32(gradient_at(k, w.numel()))}, {w});
  return w;
}

TEST(AdamTest, MatchesKerasReference) {
  const Hyper h{0.05, 0.8, 0.95, 0.2, 0.0};
  const Tensor w = run(
      Adam({.learning_rate = h.lr, .beta_1 = h.beta_1, .beta_2 = h.beta_2, .epsilon = h.epsilon}),
      7);
  EXPECT_TRUE(near(w, reference(h, 7)));
  EXPECT_FALSE(near(w, bias_corrected_epsilon(h, 7)));
}

TEST(AdamTest, DefaultsAreKeras) {
  Adam opt;
  EXPECT_EQ(opt.name(), "adam");
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.001);
  EXPECT_TRUE(near(run(opt, 5), reference({0.001, 0.9, 0.999, 1e-7, 0.0}, 5)));
}

TEST(AdamTest, SlotsAreMomentumAndVelocity) {
  Adam opt({.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.75});
  Tensor w = f32({1.0, 2.0});
  opt.apply_gradients({f32({2.0, -4.0})}, {w});
  const auto state = opt.get_state();
  ASSERT_EQ(state.slots.size(), 2u);
  EXPECT_EQ(state.slots[0].name, "momentum/0");
  EXPECT_EQ(state.slots[1].name, "velocity/0");
  // m = 0.5 g, v = 0.25 g^2 after one step from zero.
  EXPECT_EQ(state.slots[0].value.to_vector<double>(), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(state.slots[1].value.to_vector<double>(), (std::vector<double>{1.0, 4.0}));
}

TEST(AdamTest, InvalidBetasThrow) {
  EXPECT_THROW(Adam({.beta_1 = 1.0}), ValueError);
  EXPECT_THROW(Adam({.beta_2 = -0.1}), ValueError);
  EXPECT_THROW(Adam({.epsilon = -1.0}), ValueError);
}

TEST(AdamWTest, DecoupledWeightDecayMatchesKerasReference) {
  const Hyper h{0.05, 0.8, 0.95, 0.01, 0.5};
  const Tensor w = run(AdamW({.learning_rate = h.lr,
                              .weight_decay = h.weight_decay,
                              .beta_1 = h.beta_1,
                              .beta_2 = h.beta_2,
                              .epsilon = h.epsilon}),
                       6);
  EXPECT_TRUE(near(w, reference(h, 6)));
  // Without the decay the result is measurably different.
  EXPECT_FALSE(near(w, reference({h.lr, h.beta_1, h.beta_2, h.epsilon, 0.0}, 6)));
}

TEST(AdamWTest, DefaultsAreKeras) {
  AdamW opt;
  EXPECT_EQ(opt.name(), "adamw");
  EXPECT_TRUE(near(run(opt, 4), reference({0.001, 0.9, 0.999, 1e-7, 0.004}, 4)));
}

TEST(AdamWTest, DecayUsesTheScheduledLearningRate) {
  // Zero gradients: only the decay moves the variable, w *= (1 - wd * lr(k)) per step.
  const optimizers::schedules::ExponentialDecay schedule{
      .initial_learning_rate = 0.5, .decay_steps = 1, .decay_rate = 0.5};
  AdamW opt({.learning_rate = schedule, .weight_decay = 0.2});
  Tensor w = f32({1.0, -2.0});
  double factor = 1.0;
  for (int k = 0; k < 4; ++k) {
    opt.apply_gradients({f32({0.0, 0.0})}, {w});
    factor *= 1.0 - 0.2 * 0.5 * std::pow(0.5, k);
  }
  EXPECT_TRUE(near(w, {factor, -2.0 * factor}));
}

TEST(AdamTest, StateExportImportContinuesBitIdentically) {
  const optimizers::AdamOptions options{.learning_rate = 0.02, .beta_1 = 0.7, .beta_2 = 0.9};
  Tensor a = f32(kStart);
  Adam full(options);
  for (int k = 0; k < 10; ++k) full.apply_gradients({f32(gradient_at(k, 6))}, {a});

  Tensor b = f32(kStart);
  Adam first(options);
  for (int k = 0; k < 5; ++k) first.apply_gradients({f32(gradient_at(k, 6))}, {b});
  const auto saved = first.get_state();
  Tensor c = f32(b.to_vector<double>());
  Adam second(options);
  second.set_state(saved);
  for (int k = 5; k < 10; ++k) second.apply_gradients({f32(gradient_at(k, 6))}, {c});
  // The bias corrections depend on the restored iteration count: any slip shows here.
  EXPECT_EQ(std::memcmp(a.data_ptr(), c.data_ptr(), a.nbytes()), 0);
  EXPECT_EQ(second.iterations(), 10);
}

}  // namespace
}  // namespace mixprec
