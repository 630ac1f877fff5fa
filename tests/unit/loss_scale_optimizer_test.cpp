// LossScaleOptimizer: the DESIGN §4 loss-scaling list, one TEST each, plus the fused
// unscale+check on 16-bit gradients. Expected scales and counters are worked out by hand from the
// rules in DESIGN §2.5.
#include "mixprec/mixed_precision/loss_scale_optimizer.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/optimizers.h"

namespace mixprec {
namespace {

using mixed_precision::LossScaleOptimizer;
using optimizers::Adam;
using optimizers::SGD;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

// One custom-loop step on a single variable with the given (unscaled) gradient: scale it as the
// backward pass of a scaled loss would, unscale through the optimizer, apply.
void step(LossScaleOptimizer& opt, Tensor& w, const std::vector<double>& unscaled) {
  std::vector<double> scaled(unscaled.size());
  for (std::size_t i = 0; i < unscaled.size(); ++i) scaled[i] = unscaled[i] * opt.loss_scale();
  opt.apply_gradients(opt.get_unscaled_gradients({f32(scaled)}), {w});
}

const std::vector<double> kFinite = {0.5, -0.25};
const std::vector<double> kWithInf = {0.5, kInf};
const std::vector<double> kWithNaN = {NAN, -0.25};

TEST(LossScaleOptimizerTest, DefaultsAreKeras) {
  LossScaleOptimizer opt(SGD{});
  EXPECT_EQ(opt.name(), "loss_scale_optimizer");
  EXPECT_TRUE(opt.dynamic());
  EXPECT_EQ(opt.loss_scale(), 32768.0);
  EXPECT_EQ(opt.dynamic_growth_steps(), 2000);
  EXPECT_EQ(opt.dynamic_counter(), 0);
  EXPECT_EQ(opt.skipped_steps(), 0);
  EXPECT_EQ(opt.inner_optimizer().name(), "sgd");
}

TEST(LossScaleOptimizerTest, GrowsAfterGrowthStepsFiniteSteps) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 8, .dynamic_growth_steps = 3});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kFinite);
  step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 8.0);
  EXPECT_EQ(opt.dynamic_counter(), 2);
  step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 16.0);
  EXPECT_EQ(opt.dynamic_counter(), 0);
  for (int k = 0; k < 3; ++k) step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 32.0);
  EXPECT_EQ(opt.skipped_steps(), 0);
  EXPECT_EQ(opt.iterations(), 6);
}

TEST(LossScaleOptimizerTest, HalvesOnInf) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 1024});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kWithInf);
  EXPECT_EQ(opt.loss_scale(), 512.0);
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_TRUE(opt.last_step_skipped());
}

TEST(LossScaleOptimizerTest, HalvesOnNaN) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 1024});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kWithNaN);
  EXPECT_EQ(opt.loss_scale(), 512.0);
  step(opt, w, kWithNaN);
  EXPECT_EQ(opt.loss_scale(), 256.0);
  EXPECT_EQ(opt.skipped_steps(), 2);
  EXPECT_EQ(opt.consecutive_skipped_steps(), 2);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST(LossScaleOptimizerTest, FloorAtOne) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 2});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kWithInf);
  EXPECT_EQ(opt.loss_scale(), 1.0);
  step(opt, w, kWithInf);
  EXPECT_EQ(opt.loss_scale(), 1.0);
  step(opt, w, kWithNaN);
  EXPECT_EQ(opt.loss_scale(), 1.0);
  EXPECT_EQ(opt.skipped_steps(), 3);
}

TEST(LossScaleOptimizerTest, GrowthStopsAt2To127OnTheCpu) {
  // Keras doubles only while twice the scale is finite in float32: the scale never leaves float32
  // range (it used to keep doubling in double on the CPU, to 2^128 here and on towards DBL_MAX).
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 0x1p126, .dynamic_growth_steps = 1});
  Tensor w = f32({1.0, 2.0});
  opt.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(opt.loss_scale(), 0x1p127);
  opt.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(opt.loss_scale(), 0x1p127);
  EXPECT_EQ(opt.dynamic_counter(), 0);  // the counter still restarts
  for (int k = 0; k < 5; ++k) opt.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(opt.loss_scale(), 0x1p127);
  EXPECT_EQ(opt.get_state().scalars.at("loss_scale"), 0x1p127);
  // A requested scale beyond float32 is clamped to 2^127 and does not grow either.
  LossScaleOptimizer huge(SGD{},
                          {.initial_scale = std::ldexp(1.0, 1023), .dynamic_growth_steps = 1});
  EXPECT_EQ(huge.loss_scale(), 0x1p127);
  huge.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(huge.loss_scale(), 0x1p127);
  // A non-power-of-two scale doubles while twice it is finite in float32, then stops.
  LossScaleOptimizer near(SGD{}, {.initial_scale = 0x1.8p126, .dynamic_growth_steps = 1});
  near.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(near.loss_scale(), 0x1.8p127);
  near.apply_gradients({f32(kFinite)}, {w});
  EXPECT_EQ(near.loss_scale(), 0x1.8p127);
  EXPECT_TRUE(std::isfinite(static_cast<float>(near.loss_scale())));
}

TEST(LossScaleOptimizerTest, UnscaledGradientsCarryTheirVerdictOnlyWhileItHolds) {
  LossScaleOptimizer opt(SGD({.learning_rate = 1.0}), {.initial_scale = 8});
  Tensor w = f32({1.0, 1.0});
  const mixed_precision::UnscaledGradients finite = opt.get_unscaled_gradients({f32({8.0, 8.0})});
  EXPECT_EQ(finite.size(), 1u);
  EXPECT_EQ(finite[0].to_vector<double>(), (std::vector<double>{1.0, 1.0}));
  // A later unscale overwrites the verdict: the earlier result is checked again, not trusted.
  const auto bad = opt.get_unscaled_gradients({f32({kInf, 8.0})});
  opt.apply_gradients(finite, {w});
  EXPECT_FALSE(opt.last_step_skipped());
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0.0, 0.0}));
  // And a stale bad one is still caught.
  opt.apply_gradients(bad, {w});
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0.0, 0.0}));
  // Gradients unscaled by another optimizer are checked here too.
  LossScaleOptimizer other(SGD{}, {.initial_scale = 8});
  opt.apply_gradients(other.get_unscaled_gradients({f32({kInf, 0.0})}), {w});
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_EQ(opt.skipped_steps(), 2);
  // Converted to a plain list, they are checked in apply_gradients like any gradients.
  EXPECT_EQ(opt.loss_scale(), 2.0);  // halved twice
  const std::vector<Tensor> plain = opt.get_unscaled_gradients({f32({4.0, -4.0})});
  opt.apply_gradients(plain, {w});
  EXPECT_FALSE(opt.last_step_skipped());
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{-2.0, 2.0}));
}

TEST(LossScaleOptimizerTest, StuckAfterARunOfSkipsAtTheFloor) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 4});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kWithInf);  // ran at 4, now 2
  step(opt, w, kWithInf);  // ran at 2, now 1
  step(opt, w, kWithNaN);  // ran at 1: the first skip at the floor
  EXPECT_FALSE(opt.stuck(3)) << "the halvings down to 1 do not count";
  step(opt, w, kWithNaN);
  step(opt, w, kWithInf);  // three skips in a row at the floor
  EXPECT_TRUE(opt.stuck(3));
  EXPECT_FALSE(opt.stuck(4));
  step(opt, w, kFinite);
  EXPECT_FALSE(opt.stuck(1));
  LossScaleOptimizer fixed(SGD{}, {.dynamic = false, .initial_scale = 1024});
  step(fixed, w, kWithInf);
  EXPECT_TRUE(fixed.stuck(1));
  EXPECT_EQ(fixed.loss_scale(), 1024.0);
}

TEST(LossScaleOptimizerTest, AlsoNamedInTheOptimizersNamespace) {
  optimizers::LossScaleOptimizer opt(SGD{}, optimizers::LossScaleOptions{.initial_scale = 2});
  static_assert(std::is_same_v<optimizers::LossScaleOptimizer, LossScaleOptimizer>);
  EXPECT_EQ(opt.loss_scale(), 2.0);
}

TEST(LossScaleOptimizerTest, CounterResetOnOverflow) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 64, .dynamic_growth_steps = 5});
  Tensor w = f32({1.0, 2.0});
  for (int k = 0; k < 3; ++k) step(opt, w, kFinite);
  EXPECT_EQ(opt.dynamic_counter(), 3);
  step(opt, w, kWithInf);
  EXPECT_EQ(opt.dynamic_counter(), 0);
  EXPECT_EQ(opt.loss_scale(), 32.0);
  step(opt, w, kFinite);
  EXPECT_EQ(opt.dynamic_counter(), 1);
  EXPECT_EQ(opt.consecutive_skipped_steps(), 0);
  EXPECT_FALSE(opt.last_step_skipped());
  // Growth now needs 5 more finite steps from the reset, not 5 - 3.
  for (int k = 0; k < 3; ++k) step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 32.0);
  step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 64.0);
}

TEST(LossScaleOptimizerTest, SkippedStepLeavesVariablesAndSlotsBitIdenticalAndAdvancesIterations) {
  LossScaleOptimizer opt(Adam({.learning_rate = 0.1}), {.initial_scale = 256});
  Tensor a = f32({1.0, 2.0}), b = f32({-3.0});
  const auto grads = [&](double bad) {
    const double s = opt.loss_scale();
    return opt.get_unscaled_gradients({f32({0.5 * s, -0.25 * s}), f32({bad * s})});
  };
  opt.apply_gradients(grads(0.125), {a, b});
  opt.apply_gradients(grads(0.5), {a, b});
  const Tensor a_before = f32(a.to_vector<double>()), b_before = f32(b.to_vector<double>());
  const auto state_before = opt.get_state();

  opt.apply_gradients(grads(kInf), {a, b});  // Inf only in the second variable's gradient
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_TRUE(bitwise_equal(a, a_before));  // the finite gradient was not applied either
  EXPECT_TRUE(bitwise_equal(b, b_before));
  const auto state_after = opt.get_state();
  const auto& inner_before = state_before.inner.at(0);
  const auto& inner_after = state_after.inner.at(0);
  ASSERT_EQ(inner_after.slots.size(), inner_before.slots.size());
  for (std::size_t i = 0; i < inner_before.slots.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(inner_after.slots[i].value, inner_before.slots[i].value))
        << inner_before.slots[i].name;
  }
  EXPECT_EQ(opt.iterations(), 3);
  EXPECT_EQ(opt.inner_optimizer().iterations(), 3);
  EXPECT_EQ(inner_after.iterations, 3);
}

// A deterministic 10-step script with gradient overflows: the gradient depends on the variable
// (as a real one does), Inf at steps 2 and 6 and NaN at step 7.
std::vector<double> script_gradient(int k, const Tensor& w) {
  std::vector<double> g = w.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.3 * g[i] + std::sin(1.0 + k + 2.0 * i);
  if (k == 2 || k == 6) g[0] = kInf;
  if (k == 7) g[1] = NAN;
  return g;
}

TEST(LossScaleOptimizerTest, ExportImportMidRunContinuesBitIdentically) {
  const mixed_precision::LossScaleOptions options{.initial_scale = 1024, .dynamic_growth_steps = 2};
  const auto make = [&] { return LossScaleOptimizer(Adam({.learning_rate = 0.05}), options); };

  LossScaleOptimizer a = make();
  Tensor wa = f32({0.5, -1.0, 2.0});
  for (int k = 0; k < 10; ++k) step(a, wa, script_gradient(k, wa));

  LossScaleOptimizer b = make();
  Tensor wb = f32({0.5, -1.0, 2.0});
  for (int k = 0; k < 5; ++k) step(b, wb, script_gradient(k, wb));
  const optimizers::OptimizerState saved = b.get_state();
  EXPECT_EQ(saved.scalars.at("loss_scale"), b.loss_scale());
  EXPECT_EQ(saved.scalars.at("skipped_steps"), 1.0);

  LossScaleOptimizer c = make();
  c.set_state(saved);
  Tensor wc = f32(wb.to_vector<double>());
  EXPECT_EQ(c.loss_scale(), b.loss_scale());
  EXPECT_EQ(c.dynamic_counter(), b.dynamic_counter());
  EXPECT_EQ(c.iterations(), 5);
  for (int k = 5; k < 10; ++k) step(c, wc, script_gradient(k, wc));

  EXPECT_TRUE(bitwise_equal(wc, wa));
  EXPECT_EQ(c.loss_scale(), a.loss_scale());
  EXPECT_EQ(c.dynamic_counter(), a.dynamic_counter());
  EXPECT_EQ(c.skipped_steps(), a.skipped_steps());
  EXPECT_EQ(c.skipped_steps(), 3);
  EXPECT_EQ(c.iterations(), a.iterations());
  const auto sa = a.get_state().inner.at(0), sc = c.get_state().inner.at(0);
  ASSERT_EQ(sa.slots.size(), sc.slots.size());
  for (std::size_t i = 0; i < sa.slots.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(sc.slots[i].value, sa.slots[i].value)) << sa.slots[i].name;
  }
}

TEST(LossScaleOptimizerTest, SetStateRejectsBadStatesWithoutChangingAnything) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 64});
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kFinite);
  auto state = opt.get_state();
  EXPECT_THROW(opt.set_state(state.inner.at(0)), ValueError);  // an SGD state
  auto bad = state;
  bad.scalars["loss_scale"] = -1.0;
  EXPECT_THROW(opt.set_state(bad), ValueError);
  bad = state;
  bad.scalars.erase("dynamic_counter");
  EXPECT_THROW(opt.set_state(bad), ValueError);
  bad = state;
  bad.inner.at(0).name = "adam";
  EXPECT_THROW(opt.set_state(bad), ValueError);
  EXPECT_EQ(opt.loss_scale(), 64.0);
  EXPECT_EQ(opt.dynamic_counter(), 1);
}

TEST(LossScaleOptimizerTest, FixedScaleSkipsAndCounts) {
  LossScaleOptimizer opt(SGD({.learning_rate = 1.0}), {.dynamic = false, .initial_scale = 128});
  EXPECT_FALSE(opt.dynamic());
  Tensor w = f32({1.0, 2.0});
  step(opt, w, kWithInf);
  EXPECT_EQ(opt.loss_scale(), 128.0);
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1.0, 2.0}));  // NaN/Inf never written
  for (int k = 0; k < 5; ++k) step(opt, w, kFinite);
  EXPECT_EQ(opt.loss_scale(), 128.0);  // never grows
  EXPECT_EQ(opt.dynamic_counter(), 0);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1.0 - 5 * 0.5, 2.0 + 5 * 0.25}));
  step(opt, w, kWithNaN);
  EXPECT_EQ(opt.loss_scale(), 128.0);
  EXPECT_EQ(opt.skipped_steps(), 2);
  EXPECT_EQ(opt.iterations(), 7);
}

TEST(LossScaleOptimizerTest, InvalidOptionsThrow) {
  EXPECT_THROW(LossScaleOptimizer(SGD{}, {.dynamic = false}), ValueError);  // needs a scale
  EXPECT_THROW(
      LossScaleOptimizer(SGD{}, {.dynamic = false, .initial_scale = 8, .dynamic_growth_steps = 10}),
      ValueError);
  EXPECT_THROW(LossScaleOptimizer(SGD{}, {.initial_scale = 0.0}), ValueError);
  EXPECT_THROW(LossScaleOptimizer(SGD{}, {.initial_scale = kInf}), ValueError);
  EXPECT_THROW(LossScaleOptimizer(SGD{}, {.dynamic_growth_steps = 0}), ValueError);
  EXPECT_THROW(LossScaleOptimizer(optimizers::Optimizer{}), ValueError);
  LossScaleOptimizer once(SGD{});
  // No double wrapping (a one-argument LossScaleOptimizer(once) is the copy constructor).
  EXPECT_THROW(LossScaleOptimizer(once, {}), ValueError);
  const optimizers::Optimizer base = once;
  EXPECT_THROW(LossScaleOptimizer{base}, ValueError);
}

TEST(LossScaleOptimizerTest, ClippingAppliesAfterUnscale) {
  // Unscaled gradient (3, 4) has norm 5; clipnorm 1 scales it to (0.6, 0.8). Clipping the scaled
  // gradient (norm 5 * 1024) first and unscaling afterwards would give (0.6, 0.8) / 1024.
  LossScaleOptimizer opt(SGD({.learning_rate = 1.0, .clipnorm = 1.0}), {.initial_scale = 1024});
  Tensor w = f32({0.0, 0.0});
  step(opt, w, {3.0, 4.0});
  const auto v = w.to_vector<double>();
  EXPECT_NEAR(v[0], -0.6, 1e-6);
  EXPECT_NEAR(v[1], -0.8, 1e-6);
}

TEST(LossScaleOptimizerTest, UnscaleAndCheckFindsInfAndNaNInHalfGradients) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 1024});
  // float16 gradients, as a float16 variable's backward pass produces them.
  const Tensor finite = f32({2048.0, -512.0, 60000.0, 0.0}).to(kFloat16);
  const Tensor with_inf = f32({2048.0, kInf, 1.0, 0.0}).to(kFloat16);
  const Tensor with_nan = f32({NAN, 1.0, 2.0, 3.0}).to(kBFloat16);

  std::vector<Tensor> out = opt.get_unscaled_gradients({finite});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype(), kFloat32);
  EXPECT_EQ(out[0].to_vector<double>(), (std::vector<double>{2.0, -0.5, 60000.0 / 1024.0, 0.0}));

  Tensor w = f32({0.0, 0.0, 0.0, 0.0});
  opt.apply_gradients(opt.get_unscaled_gradients({with_inf}), {w});
  EXPECT_TRUE(opt.last_step_skipped());
  opt.apply_gradients(opt.get_unscaled_gradients({with_nan}), {w});
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_EQ(opt.skipped_steps(), 2);
  opt.apply_gradients(opt.get_unscaled_gradients({finite}), {w});
  EXPECT_FALSE(opt.last_step_skipped());
}

TEST(LossScaleOptimizerTest, UnscaleAndCheckOnALargeGradient) {
  // Above the parallel threshold, one Inf in the last chunk.
  const std::int64_t n = 100003;
  std::vector<double> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    g[static_cast<std::size_t>(i)] = 4.0 * static_cast<double>(i % 17);
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 4});
  std::vector<Tensor> out = opt.get_unscaled_gradients({f32(g)});
  const auto v = out[0].to_vector<double>();
  for (std::int64_t i = 0; i < n; i += 997) EXPECT_EQ(v[static_cast<std::size_t>(i)], i % 17);
  Tensor w = zeros({n});
  opt.apply_gradients(out, {w});
  EXPECT_FALSE(opt.last_step_skipped());
  g.back() = kInf;
  opt.apply_gradients(opt.get_unscaled_gradients({f32(g)}), {w});
  EXPECT_TRUE(opt.last_step_skipped());
}

TEST(LossScaleOptimizerTest, GradientsNotFromGetUnscaledGradientsAreCheckedInApply) {
  LossScaleOptimizer opt(SGD({.learning_rate = 1.0}), {.initial_scale = 8});
  Tensor w = f32({1.0, 1.0});
  // get_unscaled_gradients saw finite values, but different tensors reach apply_gradients.
  opt.get_unscaled_gradients({f32({8.0, 8.0})});
  opt.apply_gradients({f32({kInf, 0.0})}, {w});
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_EQ(opt.loss_scale(), 4.0);
  opt.apply_gradients({f32({0.5, 0.25})}, {w});  // finite, applied as given (already unscaled)
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0.5, 0.75}));
}

TEST(LossScaleOptimizerTest, ScaledLossKeepsItsDtypeAndScalesTheGradient) {
  LossScaleOptimizer opt(SGD{}, {.initial_scale = 512});
  Tensor x = f32({1.5, -2.0});
  x.set_requires_grad(true);
  GradientTape tape;
  const Tensor loss = sum(x * x);  // float32 scalar, d/dx = 2x
  const Tensor scaled = opt.get_scaled_loss(loss);
  EXPECT_EQ(scaled.dtype(), kFloat32);
  EXPECT_EQ(scaled.item(), 512.0 * 6.25);
  const std::vector<Tensor> grads = tape.gradient(scaled, std::vector<Tensor>{x});
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{1536.0, -2048.0}));
  const std::vector<Tensor> unscaled = opt.get_unscaled_gradients(grads);
  EXPECT_EQ(unscaled[0].to_vector<double>(), (std::vector<double>{3.0, -4.0}));
  EXPECT_EQ(opt.get_scaled_loss(scalar(1.0, {.dtype = kFloat16})).dtype(), kFloat16);
  EXPECT_THROW(opt.get_scaled_loss(scalar(1.0, {.dtype = kInt32})), DTypeError);
}

TEST(LossScaleOptimizerTest, HandleSemantics) {
  LossScaleOptimizer opt(optimizers::RMSprop{});
  optimizers::Optimizer base = opt;  // e.g. stored by compile()
  EXPECT_TRUE(mixed_precision::as_loss_scale_optimizer(base).has_value());
  EXPECT_FALSE(mixed_precision::as_loss_scale_optimizer(SGD{}).has_value());
  Tensor w = f32({1.0});
  base.apply_gradients({f32({kInf})}, {w});  // through the base handle: still loss scaling
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(mixed_precision::as_loss_scale_optimizer(base)->loss_scale(), 16384.0);
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.001);
}

}  // namespace
}  // namespace mixprec
