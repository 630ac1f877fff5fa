// RMSprop against hand-written reference loops in double, in the Keras 3 form (epsilon inside the
// square root: var -= lr g / sqrt(v + eps)). A large epsilon makes that placement observable: the
// legacy Keras 2 form lr g / (sqrt(v) + eps) must not match.
#include "mixprec/optimizers/rmsprop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using optimizers::RMSprop;

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

std::vector<double> gradient_at(int k, std::size_t n) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    // A bias keeps the centered variance well away from zero.
    g[i] = static_cast<double>(
        static_cast<float>(0.3 + std::sin(0.2 + 0.9 * i + 1.7 * k) * (0.5 + 0.3 * i)));
  }
  return g;
}

const std::vector<double> kStart = {0.5, -1.25, 2.0, 0.1, -0.75};

struct Hyper {
  double lr, rho, momentum, epsilon;
  bool centered;
};

enum class EpsilonPlacement { inside_sqrt, outside_sqrt };

std::vector<double> reference(const Hyper& h, int steps,
                              EpsilonPlacement placement = EpsilonPlacement::inside_sqrt) {
  std::vector<double> w = kStart, v(w.size(), 0.0), mom(w.size(), 0.0), a(w.size(), 0.0);
  for (int k = 0; k < steps; ++k) {
    const auto g = gradient_at(k, w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      v[i] = h.rho * v[i] + (1.0 - h.rho) * g[i] * g[i];
      double second_moment = v[i];
      if (h.centered) {
        a[i] = h.rho * a[i] + (1.0 - h.rho) * g[i];
        second_moment = v[i] - a[i] * a[i];
      }
      const double increment = placement == EpsilonPlacement::inside_sqrt
                                   ? h.lr * g[i] / std::sqrt(second_moment + h.epsilon)
                                   : h.lr * g[i] / (std::sqrt(second_moment) + h.epsilon);
      if (h.momentum > 0.0) {
        mom[i] = h.momentum * mom[i] + increment;
        w[i] -= mom[i];
      } else {
        w[i] -= increment;
      }
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

Tensor run(const Hyper& h, int steps) {
  RMSprop opt({.learning_rate = h.lr,
               .rho = h.rho,
               .momentum = h.momentum,
               .epsilon = h.epsilon,
               .centered = h.centered});
  Tensor w = f32(kStart);
  for (int k = 0; k < steps; ++k) opt.apply_gradients({f32(gradient_at(k, w.numel()))}, {w});
  return w;
}

TEST(RMSpropTest, PlainMatchesKeras3Reference) {
  const Hyper h{0.01, 0.8, 0.0, 0.05, false};
  const Tensor w = run(h, 6);
  EXPECT_TRUE(near(w, reference(h, 6)));
  EXPECT_FALSE(near(w, reference(h, 6, EpsilonPlacement::outside_sqrt)));
}

TEST(RMSpropTest, MomentumMatchesKeras3Reference) {
  const Hyper h{0.01, 0.8, 0.6, 0.05, false};
  EXPECT_TRUE(near(run(h, 6), reference(h, 6)));
  EXPECT_FALSE(near(run(h, 6), reference({0.01, 0.8, 0.0, 0.05, false}, 6)));
}

TEST(RMSpropTest, CenteredMatchesKeras3Reference) {
  const Hyper h{0.01, 0.7, 0.0, 0.05, true};
  EXPECT_TRUE(near(run(h, 6), reference(h, 6)));
  EXPECT_FALSE(near(run(h, 6), reference({0.01, 0.7, 0.0, 0.05, false}, 6)));
}

TEST(RMSpropTest, CenteredWithMomentumMatchesKeras3Reference) {
  const Hyper h{0.01, 0.7, 0.5, 0.05, true};
  EXPECT_TRUE(near(run(h, 6), reference(h, 6)));
}

TEST(RMSpropTest, DefaultsAreKeras) {
  RMSprop opt;
  EXPECT_EQ(opt.name(), "rmsprop");
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.001);
  Tensor w = f32(kStart);
  for (int k = 0; k < 4; ++k) opt.apply_gradients({f32(gradient_at(k, 5))}, {w});
  EXPECT_TRUE(near(w, reference({0.001, 0.9, 0.0, 1e-7, false}, 4)));
  EXPECT_EQ(opt.get_state().slots.size(), 1u);  // velocity only
}

TEST(RMSpropTest, SlotNamesFollowTheOptions) {
  RMSprop opt({.momentum = 0.5, .centered = true});
  Tensor w = f32({1.0});
  opt.apply_gradients({f32({1.0})}, {w});
  const auto state = opt.get_state();
  ASSERT_EQ(state.slots.size(), 3u);
  EXPECT_EQ(state.slots[0].name, "velocity/0");
  EXPECT_EQ(state.slots[1].name, "momentum/0");
  EXPECT_EQ(state.slots[2].name, "average_gradient/0");
}

TEST(RMSpropTest, LargeVariableMatchesReference) {
  // Above the parallel threshold: the OpenMP loop must agree with the scalar formula.
  const std::size_t n = 70000;
  std::vector<double> start(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = static_cast<float>(std::cos(0.01 * i));
    g[i] = static_cast<float>(std::sin(0.02 * i) + 0.1);
  }
  RMSprop opt({.learning_rate = 0.01, .rho = 0.5, .epsilon = 1e-3});
  Tensor w = f32(start);
  opt.apply_gradients({f32(g)}, {w});
  std::vector<double> expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    expected[i] = start[i] - 0.01 * g[i] / std::sqrt(0.5 * g[i] * g[i] + 1e-3);
  }
  EXPECT_TRUE(near(w, expected));
}

}  // namespace
}  // namespace mixprec
