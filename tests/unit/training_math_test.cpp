// The per-element bodies of training (backend/kernel_math/training.h), which the CPU loops and the
// CUDA kernels both run, exercised on the host: every UpdateKind against a plain double-precision
// reference written here (within float32 rounding), the CPU's vectorised and threaded loops against
// the scalar body (bit for bit), the per-step constants, the gradient transform, the unscale
// element and its non-finite test, and the loss-scale rule against a model of DESIGN §2.5,
// including the float32 cap at 2^127.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/optimizer_kernels.h"
#include "backend/kernel_math/training.h"
#include "optimizers/update_constants.h"

namespace mixprec {
namespace {

using kernel_math::LossScaleMode;
using kernel_math::LossScaleState;
using kernel_math::UpdateKind;
using kernel_math::UpdateRule;

constexpr UpdateKind kAllKinds[] = {UpdateKind::sgd,
                                    UpdateKind::sgd_momentum,
                                    UpdateKind::sgd_nesterov,
                                    UpdateKind::adam,
                                    UpdateKind::rmsprop,
                                    UpdateKind::rmsprop_momentum,
                                    UpdateKind::rmsprop_centered,
                                    UpdateKind::rmsprop_centered_momentum};

// The rule of each kind, with realistic constants (Adam at step 7, AdamW's decay included).
UpdateRule rule_of(UpdateKind kind, double weight_decay = 0.0) {
  using namespace optimizers::detail;
  switch (kind) {
    case UpdateKind::sgd: return sgd_rule(0.05, 0.0, false);
    case UpdateKind::sgd_momentum: return sgd_rule(0.05, 0.9, false);
    case UpdateKind::sgd_nesterov: return sgd_rule(0.05, 0.9, true);
    case UpdateKind::adam: return adam_rule(0.01, 6, 0.9, 0.999, 1e-7, weight_decay);
    default: break;
  }
  const bool momentum =
      kind == UpdateKind::rmsprop_momentum || kind == UpdateKind::rmsprop_centered_momentum;
  const bool centered =
      kind == UpdateKind::rmsprop_centered || kind == UpdateKind::rmsprop_centered_momentum;
  return rmsprop_rule(0.01, 0.9, momentum ? 0.5 : 0.0, 1e-7,
                      momentum ? RmspropMomentum::with_momentum : RmspropMomentum::none,
                      centered ? RmspropCentered::yes : RmspropCentered::no);
}

struct Element {
  double var, s0, s1, s2;
};

// The formulas of mixprec/optimizers/{sgd,adam,rmsprop}.h in double, from the same float inputs and
// constants: what update_element approximates with float rounding.
Element reference(UpdateKind kind, const kernel_math::UpdateConstants& c, double raw, Element e,
                  double clip_scale) {
  const double g = std::clamp(raw * clip_scale, -double(c.clip_limit), double(c.clip_limit));
  switch (kind) {
    case UpdateKind::sgd: e.var -= c.learning_rate * g; return e;
    case UpdateKind::sgd_momentum:
    case UpdateKind::sgd_nesterov: {
      e.s0 = c.momentum * e.s0 - c.learning_rate * g;
      e.var += kind == UpdateKind::sgd_momentum ? e.s0 : c.momentum * e.s0 - c.learning_rate * g;
      return e;
    }
    case UpdateKind::adam: {
      const double w = e.var * (1.0 - c.decay);
      e.s0 += (g - e.s0) * c.one_minus_beta_1;
      e.s1 += (g * g - e.s1) * c.one_minus_beta_2;
      e.var = w - e.s0 * c.alpha / (std::sqrt(e.s1) + c.epsilon);
      return e;
    }
    default: break;
  }
  const bool momentum =
      kind == UpdateKind::rmsprop_momentum || kind == UpdateKind::rmsprop_centered_momentum;
  const bool centered =
      kind == UpdateKind::rmsprop_centered || kind == UpdateKind::rmsprop_centered_momentum;
  const double rho = c.rho, one_minus_rho = 1.0 - rho;
  e.s0 = rho * e.s0 + one_minus_rho * g * g;
  double denominator = e.s0 + c.epsilon;
  if (centered) {
    double& average = momentum ? e.s2 : e.s1;
    average = rho * average + one_minus_rho * g;
    denominator = e.s0 - average * average + c.epsilon;
  }
  const double increment = c.learning_rate * g / std::sqrt(denominator);
  if (momentum) {
    e.s1 = c.momentum * e.s1 + increment;
    e.var -= e.s1;
  } else {
    e.var -= increment;
  }
  return e;
}

struct Arrays {
  std::vector<float> var, grad, s0, s1, s2;
};

// Values where every formula is finite (velocities positive, centered averages small), with exact
// zeros and gradients past the clip limit among them.
Arrays random_arrays(std::size_t n, std::uint64_t seed) {
  auto next = [&](float lo, float hi) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<float>((seed >> 40) & 0xffffff) / 16777216.0f;
  };
  Arrays a;
  for (std::size_t i = 0; i < n; ++i) {
    a.var.push_back(next(-1.0f, 1.0f));
    a.grad.push_back(i % 17 == 0 ? 0.0f : next(-3.0f, 3.0f));
    a.s0.push_back(next(0.5f, 1.0f));
    a.s1.push_back(next(0.0f, 0.5f));
    a.s2.push_back(next(-0.1f, 0.1f));
  }
  return a;
}

// update_element<K> on every element, one at a time (the body as a kernel thread runs it).
void run_scalar(const UpdateRule& rule, Arrays& a, float clip_scale) {
  kernel_math::dispatch_update_kind(rule.kind, [&]<UpdateKind K>() {
    for (std::size_t i = 0; i < a.var.size(); ++i) {
      kernel_math::update_element<K>(rule.constants, a.grad[i], &a.var[i], &a.s0[i], &a.s1[i],
                                     &a.s2[i], clip_scale);
    }
  });
}

struct Clip {
  float scale, limit;
};
constexpr Clip kClips[] = {{1.0f, std::numeric_limits<float>::infinity()}, {0.7f, 1.5f}};

void expect_close(double got, double want, const char* what, std::size_t i) {
  // A handful of float32 roundings of values of order 1: a few ulps of the larger magnitude.
  const double tolerance = 8.0 * std::numeric_limits<float>::epsilon() * (1.0 + std::abs(want));
  ASSERT_NEAR(got, want, tolerance) << what << "[" << i << "]";
}

TEST(TrainingMathTest, EveryUpdateKindMatchesADoubleReference) {
  for (UpdateKind kind : kAllKinds) {
    for (double weight_decay : {0.0, 0.1}) {
      if (weight_decay != 0.0 && kind != UpdateKind::adam) continue;
      for (const Clip& clip : kClips) {
        SCOPED_TRACE("kind " + std::to_string(static_cast<int>(kind)) + " decay " +
                     std::to_string(weight_decay) + " clip " + std::to_string(clip.limit));
        UpdateRule rule = rule_of(kind, weight_decay);
        rule.constants.clip_limit = clip.limit;
        const Arrays before = random_arrays(1003, 7);
        Arrays after = before;
        run_scalar(rule, after, clip.scale);
        const int slots = kernel_math::update_slot_count(kind);
        for (std::size_t i = 0; i < before.var.size(); ++i) {
          const Element want =
              reference(kind, rule.constants, before.grad[i],
                        {before.var[i], before.s0[i], before.s1[i], before.s2[i]}, clip.scale);
          expect_close(after.var[i], want.var, "variable", i);
          if (slots > 0) expect_close(after.s0[i], want.s0, "slot 0", i);
          if (slots > 1) expect_close(after.s1[i], want.s1, "slot 1", i);
          if (slots > 2) expect_close(after.s2[i], want.s2, "slot 2", i);
          // Slots past the kind's layout are never touched.
          if (slots < 2) ASSERT_EQ(after.s1[i], before.s1[i]);
          if (slots < 3) ASSERT_EQ(after.s2[i], before.s2[i]);
        }
      }
    }
  }
}

void expect_bit_identical(const std::vector<float>& got, const std::vector<float>& want,
                          const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint32_t g, w;
    std::memcpy(&g, &got[i], sizeof g);
    std::memcpy(&w, &want[i], sizeof w);
    ASSERT_EQ(g, w) << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

TEST(TrainingMathTest, TheCpuLoopsRunTheScalarBodyBitForBit) {
  // Above the parallel threshold, with a tail: the vectorised, threaded loop of cpu::update.
  const std::size_t n = 100003;
  for (UpdateKind kind : kAllKinds) {
    for (const Clip& clip : kClips) {
      SCOPED_TRACE("kind " + std::to_string(static_cast<int>(kind)));
      UpdateRule rule = rule_of(kind, 0.05);
      rule.constants.clip_limit = clip.limit;
      Arrays loop = random_arrays(n, 11), scalar = loop;
      float* const slots[kernel_math::kMaxUpdateSlots] = {loop.s0.data(), loop.s1.data(),
                                                          loop.s2.data()};
      cpu::update(rule, loop.var.data(), loop.grad.data(), slots, static_cast<std::int64_t>(n),
                  clip.scale);
      run_scalar(rule, scalar, clip.scale);
      expect_bit_identical(loop.var, scalar.var, "variable");
      expect_bit_identical(loop.s0, scalar.s0, "slot 0");
      expect_bit_identical(loop.s1, scalar.s1, "slot 1");
      expect_bit_identical(loop.s2, scalar.s2, "slot 2");
    }
  }
}

TEST(TrainingMathTest, RulesCarryTheirConstantsAndSlotLayouts) {
  using namespace optimizers::detail;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-7, wd = 0.004;
  for (std::int64_t iteration : {0, 1, 9, 999, 100000}) {
    const UpdateRule r = adam_rule(lr, iteration, b1, b2, eps, wd);
    const double t = static_cast<double>(iteration) + 1.0;
    const double alpha = lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
    EXPECT_EQ(r.kind, UpdateKind::adam);
    EXPECT_EQ(r.constants.alpha, static_cast<float>(alpha)) << "iteration " << iteration;
    EXPECT_EQ(r.constants.one_minus_beta_1, static_cast<float>(1.0 - b1));
    EXPECT_EQ(r.constants.one_minus_beta_2, static_cast<float>(1.0 - b2));
    EXPECT_EQ(r.constants.epsilon, static_cast<float>(eps));
    EXPECT_EQ(r.constants.decay, static_cast<float>(wd * lr));
    EXPECT_TRUE(std::isinf(r.constants.clip_limit));
  }
  // t = 1: lr * sqrt(1 - b2) / (1 - b1) = 1e-3 * 0.0316228 / 0.1
  EXPECT_NEAR(adam_rule(lr, 0, b1, b2, eps, 0).constants.alpha, 3.16227766e-4, 1e-10);

  EXPECT_EQ(sgd_rule(0.1, 0.0, true).kind, UpdateKind::sgd);  // no momentum slot: plain
  EXPECT_EQ(sgd_rule(0.1, 0.9, false).kind, UpdateKind::sgd_momentum);
  EXPECT_EQ(sgd_rule(0.1, 0.9, true).kind, UpdateKind::sgd_nesterov);
  EXPECT_EQ(sgd_rule(0.1, 0.9, true).constants.momentum, 0.9f);
  // A momentum slot exists whenever the option is non-zero, even if it rounds to 0.0f.
  EXPECT_EQ(sgd_rule(0.1, 1e-50, false).kind, UpdateKind::sgd_momentum);

  const UpdateRule r =
      rmsprop_rule(0.001, 0.9, 0.5, 1e-7, RmspropMomentum::with_momentum, RmspropCentered::yes);
  EXPECT_EQ(r.kind, UpdateKind::rmsprop_centered_momentum);
  EXPECT_EQ(r.constants.one_minus_rho, 1.0f - 0.9f);  // 1 - rho in float
  EXPECT_EQ(r.constants.momentum, 0.5f);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::sgd), 0);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::sgd_nesterov), 1);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::adam), 2);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::rmsprop), 1);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::rmsprop_centered), 2);
  EXPECT_EQ(kernel_math::update_slot_count(UpdateKind::rmsprop_centered_momentum), 3);
}

TEST(TrainingMathTest, ClippingKeepsNaNAndClampsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kernel_math::transformed_gradient(5.0f, 1.0f, 2.0f), 2.0f);
  EXPECT_EQ(kernel_math::transformed_gradient(-5.0f, 1.0f, 2.0f), -2.0f);
  EXPECT_EQ(kernel_math::transformed_gradient(3.0f, 0.5f, inf), 1.5f);
  EXPECT_EQ(kernel_math::transformed_gradient(-inf, 1.0f, inf), -inf);
  EXPECT_TRUE(std::isnan(kernel_math::transformed_gradient(std::nanf(""), 1.0f, 2.0f)));
}

TEST(TrainingMathTest, UnscaleElementAndTheNonFiniteTest) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kernel_math::unscale_element(3072.0, 1.0 / 1024.0), 3.0f);
  // A non-power-of-two scale rounds once, from the double quotient.
  EXPECT_EQ(kernel_math::unscale_element(1.0, 1.0 / 3.0), static_cast<float>(1.0 / 3.0));
  // float64 gradients past float32's range become Inf, which the check then sees.
  EXPECT_TRUE(kernel_math::non_finite(kernel_math::unscale_element(1e300, 1.0)));
  EXPECT_TRUE(kernel_math::non_finite(inf));
  EXPECT_TRUE(kernel_math::non_finite(-inf));
  EXPECT_TRUE(kernel_math::non_finite(std::nanf("")));
  EXPECT_FALSE(kernel_math::non_finite(std::numeric_limits<float>::max()));
  EXPECT_FALSE(kernel_math::non_finite(std::numeric_limits<float>::denorm_min()));
  EXPECT_FALSE(kernel_math::non_finite(-0.0f));
}

// ---- the loss-scale rule against a model of DESIGN §2.5 written here ----

struct Model {
  double scale;
  std::int64_t counter = 0, skipped = 0, consecutive = 0;
  bool last = false;
  void step(bool non_finite, bool dynamic, std::int64_t growth) {
    if (non_finite) {
      ++skipped;
      ++consecutive;
      last = true;
      if (dynamic) {
        scale = scale / 2 < 1 ? 1 : scale / 2;
        counter = 0;
      }
      return;
    }
    consecutive = 0;
    last = false;
    if (!dynamic) return;
    if (++counter == growth) {
      if (scale * 2 <= 0x1p127) scale *= 2;  // Keras: only while twice the scale is finite
      counter = 0;
    }
  }
};

TEST(TrainingMathTest, LossScaleRuleMatchesTheModelAndStopsAt2To127) {
  for (bool dynamic : {true, false}) {
    const std::int64_t growth = 3;
    const LossScaleMode mode = dynamic ? LossScaleMode::dynamic : LossScaleMode::fixed;
    Model model{.scale = 8.0};
    LossScaleState s{};
    s.scale = 8.0f;
    std::uint64_t x = 99;
    float largest = 0.0f;
    for (int step = 0; step < 1000; ++step) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly finite steps, so the scale climbs to the float limit and must stop there.
      const bool non_finite = (x >> 40) % 40 == 0;
      model.step(non_finite, dynamic, growth);
      s.found_inf = non_finite ? 1 : 0;
      kernel_math::loss_scale_step(mode, growth, s);
      ASSERT_EQ(s.found_inf, 0) << "the step clears the flag";
      ASSERT_EQ(static_cast<double>(s.scale), model.scale) << "step " << step;
      ASSERT_TRUE(std::isfinite(s.scale));
      ASSERT_EQ(s.counter, model.counter);
      ASSERT_EQ(s.skipped, model.skipped);
      ASSERT_EQ(s.consecutive_skipped, model.consecutive);
      ASSERT_EQ(s.last_skipped != 0, model.last);
      largest = std::max(largest, s.scale);
    }
    if (dynamic) EXPECT_EQ(largest, 0x1p127f) << "the float scale reaches 2^127 and stops there";
    if (!dynamic) EXPECT_EQ(largest, 8.0f);
  }
}

TEST(TrainingMathTest, TheCapIsTwiceFiniteInFloat32) {
  EXPECT_TRUE(kernel_math::can_double(0x1p126f));
  EXPECT_FALSE(kernel_math::can_double(0x1p127f));
  EXPECT_FALSE(kernel_math::can_double(std::numeric_limits<float>::max() / 1.5f));
  LossScaleState s{.scale = 0x1p126f};
  kernel_math::loss_scale_step(LossScaleMode::dynamic, 1, s);
  EXPECT_EQ(s.scale, 0x1p127f);
  kernel_math::loss_scale_step(LossScaleMode::dynamic, 1, s);
  EXPECT_EQ(s.scale, 0x1p127f);
  EXPECT_EQ(s.counter, 0);  // the counter still restarts
}

// Stuck counts only the skipped steps that ran at a scale that could not go lower: the halvings
// down to 1 do not count (the message then says truly "the loss scale has been 1 for N steps").
TEST(TrainingMathTest, LossScaleRuleHalvesToOneAndStuckNeedsTheFloor) {
  LossScaleState s{.scale = 4.0f, .counter = 2};
  for (float expected : {2.0f, 1.0f, 1.0f, 1.0f}) {
    EXPECT_FALSE(kernel_math::loss_scale_stuck(s, 2));
    s.found_inf = 1;
    kernel_math::loss_scale_step(LossScaleMode::dynamic, 5, s);
    EXPECT_EQ(s.scale, expected);
    EXPECT_EQ(s.counter, 0);
    EXPECT_EQ(s.last_skipped, 1);
  }
  EXPECT_EQ(s.skipped, 4);
  EXPECT_EQ(s.consecutive_skipped, 4);
  EXPECT_EQ(s.skipped_at_floor, 2);  // the steps that ran at scale 1
  EXPECT_TRUE(kernel_math::loss_scale_stuck(s, 2));
  EXPECT_FALSE(kernel_math::loss_scale_stuck(s, 3));
  kernel_math::loss_scale_step(LossScaleMode::dynamic, 5, s);  // finite
  EXPECT_EQ(s.consecutive_skipped, 0);
  EXPECT_EQ(s.skipped_at_floor, 0);
  EXPECT_EQ(s.counter, 1);
  EXPECT_EQ(s.last_skipped, 0);
  EXPECT_EQ(s.skipped, 4);
  EXPECT_FALSE(kernel_math::loss_scale_stuck(s, 1));
  // A fixed scale is at its floor whatever its value: every skipped step counts.
  LossScaleState fixed{.scale = 1024.0f};
  for (int i = 0; i < 2; ++i) {
    fixed.found_inf = 1;
    kernel_math::loss_scale_step(LossScaleMode::fixed, 5, fixed);
  }
  EXPECT_EQ(fixed.scale, 1024.0f);
  EXPECT_TRUE(kernel_math::loss_scale_stuck(fixed, 2));
  EXPECT_FALSE(kernel_math::loss_scale_stuck(fixed, 3));
}

}  // namespace
}  // namespace mixprec
