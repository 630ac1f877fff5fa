// SGD against hand-written Keras reference loops in double, plus the behaviour every optimizer
// shares (in-place updates, handle semantics, argument checks, 16-bit and undefined gradients,
// state export/import), exercised here through SGD.
#include "mixprec/optimizers/sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/optimizers.h"

namespace mixprec {
namespace {

using optimizers::SGD;

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

// A deterministic gradient for step k: float32-representable values of both signs and several
// magnitudes (the reference loops read these exact values).
std::vector<double> gradient_at(int k, std::size_t n) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = static_cast<double>(static_cast<float>(std::sin(1.0 + 0.7 * i + 1.3 * k) * (1.0 + i)));
  }
  return g;
}

const std::vector<double> kStart = {0.5, -1.25, 2.0, 0.1, -0.75};

::testing::AssertionResult near(const Tensor& actual, const std::vector<double>& expected) {
  const std::vector<double> a = actual.to_vector<double>();
  if (a.size() != expected.size()) return ::testing::AssertionFailure() << "size mismatch";
  for (std::size_t i = 0; i < a.size(); ++i) {
    // float32 rounding over a few steps: a few ulps of the values and of the increments.
    if (std::abs(a[i] - expected[i]) > 2e-6 * std::max(1.0, std::abs(expected[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs reference " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

enum class Momentum { none, plain, nesterov };

// Keras SGD in double: m = mu m - lr g; var += m (or var += mu m - lr g with Nesterov).
std::vector<double> reference(Momentum kind, double lr, double mu, int steps) {
  std::vector<double> w = kStart, m(w.size(), 0.0);
  for (int k = 0; k < steps; ++k) {
    const auto g = gradient_at(k, w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (kind == Momentum::none) {
        w[i] -= lr * g[i];
      } else {
        m[i] = mu * m[i] - lr * g[i];
        w[i] += kind == Momentum::plain ? m[i] : mu * m[i] - lr * g[i];
      }
    }
  }
  return w;
}

Tensor run(optimizers::Optimizer opt, int steps) {
  Tensor w = f32(kStart);
  for (int k = 0; k < steps; ++k) opt.apply_gradients({f32(gradient_at(k, w.numel()))}, {w});
  return w;
}

TEST(SGDTest, PlainMatchesKerasReference) {
  EXPECT_TRUE(near(run(SGD({.learning_rate = 0.1}), 5), reference(Momentum::none, 0.1, 0, 5)));
}

TEST(SGDTest, MomentumMatchesKerasReference) {
  EXPECT_TRUE(near(run(SGD({.learning_rate = 0.05, .momentum = 0.9}), 6),
                   reference(Momentum::plain, 0.05, 0.9, 6)));
}

TEST(SGDTest, NesterovMatchesKerasReference) {
  const Tensor w = run(SGD({.learning_rate = 0.05, .momentum = 0.8, .nesterov = true}), 6);
  EXPECT_TRUE(near(w, reference(Momentum::nesterov, 0.05, 0.8, 6)));
  // Nesterov differs from plain momentum by more than rounding.
  EXPECT_FALSE(near(w, reference(Momentum::plain, 0.05, 0.8, 6)));
}

TEST(SGDTest, DefaultsAreKeras) {
  SGD opt;  // learning_rate 0.01, no momentum
  EXPECT_EQ(opt.name(), "sgd");
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.01);
  EXPECT_TRUE(near(run(opt, 3), reference(Momentum::none, 0.01, 0, 3)));
  EXPECT_TRUE(opt.get_state().slots.empty());  // no momentum slot without momentum
}

TEST(SGDTest, LargeVariableUsesTheParallelLoopAndMatches) {
  const std::size_t n = 100000;  // above the parallel threshold
  std::vector<double> start(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = static_cast<float>(std::cos(0.001 * i));
    g[i] = static_cast<float>(std::sin(0.003 * i));
  }
  Tensor w = f32(start);
  SGD opt({.learning_rate = 0.1, .momentum = 0.5});
  opt.apply_gradients({f32(g)}, {w});
  opt.apply_gradients({f32(g)}, {w});
  std::vector<double> expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double m1 = -0.1 * g[i], m2 = 0.5 * m1 - 0.1 * g[i];
    expected[i] = start[i] + m1 + m2;
  }
  EXPECT_TRUE(near(w, expected));
}

TEST(SGDTest, UpdatesTheVariableInPlaceForEveryHandle) {
  Tensor w = f32({1.0, 2.0});
  const Tensor alias = w;  // another handle to the same tensor
  const void* storage = w.data_ptr();
  SGD opt({.learning_rate = 0.5});
  opt.apply_gradients({f32({1.0, -2.0})}, {w});
  EXPECT_EQ(w.data_ptr(), storage);
  EXPECT_EQ(alias.to_vector<double>(), (std::vector<double>{0.5, 3.0}));
}

TEST(SGDTest, RunsUnderNoGradEvenForVariablesThatRequireGrad) {
  Tensor w = f32({1.0, 2.0});
  w.set_requires_grad(true);
  SGD opt({.learning_rate = 1.0});
  opt.apply_gradients({f32({0.25, 0.5})}, {w});
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.grad_fn(), nullptr);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0.75, 1.5}));
}

TEST(SGDTest, CopiesShareOneState) {
  SGD opt({.learning_rate = 0.1, .momentum = 0.9});
  optimizers::Optimizer copy = opt;
  Tensor w = f32({1.0});
  copy.apply_gradients({f32({1.0})}, {w});
  EXPECT_EQ(opt.iterations(), 1);
  EXPECT_EQ(opt.get_state().slots.size(), 1u);
}

TEST(SGDTest, Float16AndBfloat16GradientsAreReadAsFloat32) {
  // Values exact in every dtype: the update must equal the float32 one bit for bit.
  const std::vector<double> g = {0.5, -0.25, 1.5, 2.0, -3.0};
  Tensor w32 = f32(kStart), w16 = f32(kStart), wbf = f32(kStart);
  SGD a({.learning_rate = 0.1}), b({.learning_rate = 0.1}), c({.learning_rate = 0.1});
  a.apply_gradients({f32(g)}, {w32});
  b.apply_gradients({f32(g).to(kFloat16)}, {w16});
  c.apply_gradients({f32(g).to(kBFloat16)}, {wbf});
  EXPECT_EQ(w16.to_vector<float>(), w32.to_vector<float>());
  EXPECT_EQ(wbf.to_vector<float>(), w32.to_vector<float>());
  EXPECT_NE(w32.to_vector<float>(), f32(kStart).to_vector<float>());
}

TEST(SGDTest, UndefinedGradientSkipsItsVariable) {
  Tensor a = f32({1.0, 2.0}), b = f32({3.0});
  SGD opt({.learning_rate = 1.0});
  opt.apply_gradients({Tensor(), f32({0.5})}, {a, b});
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{2.5}));
  EXPECT_EQ(opt.iterations(), 1);
  EXPECT_THROW(opt.apply_gradients({Tensor(), Tensor()}, {a, b}), ValueError);
}

TEST(SGDTest, ArgumentErrorsNameTheVariableAndShapes) {
  Tensor a = f32({1.0, 2.0}), b = zeros({2, 3});
  SGD opt;
  EXPECT_THROW(opt.apply_gradients({f32({1.0, 1.0})}, {a, b}), ValueError);
  try {
    opt.apply_gradients({f32({1.0, 1.0}), zeros({3, 2})}, {a, b});
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("gradient 1"), std::string::npos) << message;
    EXPECT_NE(message.find("(3, 2)"), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
  }
  Tensor half = zeros({2}, {.dtype = kFloat16});
  EXPECT_THROW(opt.apply_gradients({f32({1.0, 1.0})}, {half}), DTypeError);
  EXPECT_THROW(opt.apply_gradients({from_vector(std::vector<std::int32_t>{1, 2}, {2})}, {a}),
               DTypeError);
  EXPECT_THROW(opt.apply_gradients({f32({1, 1}), f32({1, 1})}, {a, a}), ValueError);
  EXPECT_EQ(opt.iterations(), 0);  // nothing was applied
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST(SGDTest, InvalidOptionsThrow) {
  EXPECT_THROW(SGD({.momentum = 1.5}), ValueError);
  EXPECT_THROW(SGD({.momentum = -0.1}), ValueError);
  EXPECT_THROW(SGD({.learning_rate = -1.0}), ValueError);
  EXPECT_THROW(SGD({.learning_rate = NAN}), ValueError);
  EXPECT_THROW(optimizers::Optimizer().apply_gradients({}, {}), ValueError);
}

TEST(SGDTest, GetByName) {
  EXPECT_EQ(optimizers::get("sgd").name(), "sgd");
  EXPECT_EQ(optimizers::get("Adam").name(), "adam");
  EXPECT_EQ(optimizers::get("adamw").name(), "adamw");
  EXPECT_EQ(optimizers::get("rmsprop").name(), "rmsprop");
  try {
    optimizers::get("adagrad");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("rmsprop"), std::string::npos);
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

TEST(SGDTest, StateExportImportContinuesBitIdentically) {
  const optimizers::SGDOptions options{.learning_rate = 0.05, .momentum = 0.9, .nesterov = true};
  const auto grads = [](int k) {
    return std::vector<Tensor>{f32(gradient_at(k, 5)), f32(gradient_at(k, 2))};
  };
  // Run A: 8 steps straight.
  Tensor a1 = f32(kStart), a2 = f32({1.0, -1.0});
  SGD a(options);
  for (int k = 0; k < 8; ++k) a.apply_gradients(grads(k), {a1, a2});

  // Run B: 4 steps, then a checkpoint of the variables (exact float32 copies) and the optimizer.
  Tensor b1 = f32(kStart), b2 = f32({1.0, -1.0});
  SGD b(options);
  for (int k = 0; k < 4; ++k) b.apply_gradients(grads(k), {b1, b2});
  const optimizers::OptimizerState saved = b.get_state();
  Tensor c1 = f32(b1.to_vector<double>()), c2 = f32(b2.to_vector<double>());
  ASSERT_EQ(saved.slots.size(), 2u);
  EXPECT_EQ(saved.slots[0].name, "momentum/0");
  EXPECT_EQ(saved.slots[1].name, "momentum/1");
  EXPECT_EQ(saved.iterations, 4);
  // A later step of B must not change the exported copy.
  const std::vector<float> exported = saved.slots[0].value.to_vector<float>();
  b.apply_gradients(grads(9), {b1, b2});
  EXPECT_EQ(saved.slots[0].value.to_vector<float>(), exported);

  // Restore into a fresh optimizer with the checkpointed variables and run the last 4 steps.
  SGD restored(options);
  restored.set_state(saved);
  EXPECT_EQ(restored.iterations(), 4);
  for (int k = 4; k < 8; ++k) restored.apply_gradients(grads(k), {c1, c2});
  EXPECT_TRUE(bitwise_equal(c1, a1));
  EXPECT_TRUE(bitwise_equal(c2, a2));
  const auto final_a = a.get_state(), final_c = restored.get_state();
  EXPECT_EQ(final_c.iterations, final_a.iterations);
  ASSERT_EQ(final_c.slots.size(), final_a.slots.size());
  for (std::size_t i = 0; i < final_a.slots.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(final_c.slots[i].value, final_a.slots[i].value)) << i;
  }
}

TEST(SGDTest, SetStateRejectsForeignOrMisshapenStates) {
  SGD momentum({.momentum = 0.9});
  Tensor w = f32({1.0, 2.0});
  momentum.apply_gradients({f32({1.0, 1.0})}, {w});
  optimizers::OptimizerState state = momentum.get_state();

  EXPECT_THROW(optimizers::Adam().set_state(state), ValueError);  // another kind
  EXPECT_THROW(SGD().set_state(state), ValueError);               // no momentum slot in plain SGD

  optimizers::OptimizerState renamed = state;
  renamed.slots[0].name = "velocity/0";
  EXPECT_THROW(SGD({.momentum = 0.9}).set_state(renamed), ValueError);

  // A restored slot that does not fit the variable bound to it.
  optimizers::OptimizerState wrong = state;
  wrong.slots[0].value = zeros({3});
  SGD fresh({.momentum = 0.9});
  fresh.set_state(wrong);
  EXPECT_THROW(fresh.apply_gradients({f32({1.0, 1.0})}, {w}), ShapeError);
  // ...and one that does not fit a variable already seen is refused before anything changes.
  EXPECT_THROW(momentum.set_state(wrong), ShapeError);
  EXPECT_EQ(momentum.iterations(), 1);
}

}  // namespace
}  // namespace mixprec
