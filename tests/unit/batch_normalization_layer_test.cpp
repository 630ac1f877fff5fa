// BatchNormalization: training output and moving statistics (unbiased variance)
// computed independently here, inference with given statistics, float32
// variables and statistics under mixed policies, the frozen-layer rule
// (inference mode and untouched statistics, directly or in a frozen model),
// parity (DESIGN §4: 1e-2), variable flags and counts, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/layers/batch_normalization.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

// Per-channel mean and biased variance of x (..., C), in double.
struct Stats {
  std::vector<double> mean, var;
  std::int64_t n = 0;  // values per channel
};
Stats stats_of(const Tensor& x) {
  const auto v = x.to_vector<double>();
  const std::int64_t C = x.dim(-1);
  Stats s{std::vector<double>(static_cast<std::size_t>(C)),
          std::vector<double>(static_cast<std::size_t>(C)), x.numel() / C};
  for (std::size_t i = 0; i < v.size(); ++i) s.mean[i % static_cast<std::size_t>(C)] += v[i];
  for (double& m : s.mean) m /= static_cast<double>(s.n);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double d = v[i] - s.mean[i % static_cast<std::size_t>(C)];
    s.var[i % static_cast<std::size_t>(C)] += d * d;
  }
  for (double& q : s.var) q /= static_cast<double>(s.n);
  return s;
}

// (x - mean) / sqrt(var + eps) * gamma + beta, channel last.
Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                 const std::vector<double>& gamma, const std::vector<double>& beta, double eps) {
  auto v = x.to_vector<double>();
  const std::size_t C = mean.size();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t c = i % C;
    v[i] = (v[i] - mean[c]) / std::sqrt(var[c] + eps) * gamma[c] + beta[c];
  }
  return from_vector(v, x.shape(), {.dtype = kFloat64});
}

Tensor vec(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

const std::vector<double> kGamma = {1.5, 0.5, -2.0};
const std::vector<double> kBeta = {0.25, -1.0, 3.0};

TEST(BatchNormalizationLayerTest, TrainingUsesBatchStatisticsAndUpdatesMovingOnes) {
  set_seed(31);
  layers::BatchNormalization bn;
  const Tensor x = random_normal({4, 3, 5, 3}, 2.0, 3.0);
  bn(x);  // build (inference)
  bn.set_weights({vec(kGamma), vec(kBeta), zeros({3}), ones({3})});
  const Tensor y = bn(x, {.training = true});
  const Stats s = stats_of(x);
  EXPECT_TRUE(all_close(y, normalize(x, s.mean, s.var, kGamma, kBeta, 1e-3), {1e-5, 1e-5}));
  // moving = moving * 0.99 + batch * 0.01, with the unbiased variance (n = 60
  // values/channel).
  std::vector<double> mm(3), mv(3);
  for (std::size_t c = 0; c < 3; ++c) {
    mm[c] = 0.0 * 0.99 + s.mean[c] * 0.01;
    mv[c] = 1.0 * 0.99 + s.var[c] * 60.0 / 59.0 * 0.01;
  }
  EXPECT_TRUE(all_close(bn.moving_mean(), vec(mm), {1e-6, 1e-7}));
  EXPECT_TRUE(all_close(bn.moving_variance(), vec(mv), {1e-6, 1e-7}));
  // A second step moves them again from there.
  const Tensor x2 = random_normal({4, 3, 5, 3}, -1.0, 0.5);
  bn(x2, {.training = true});
  const Stats s2 = stats_of(x2);
  for (std::size_t c = 0; c < 3; ++c) {
    mm[c] = mm[c] * 0.99 + s2.mean[c] * 0.01;
    mv[c] = mv[c] * 0.99 + s2.var[c] * 60.0 / 59.0 * 0.01;
  }
  EXPECT_TRUE(all_close(bn.moving_mean(), vec(mm), {1e-6, 1e-7}));
  EXPECT_TRUE(all_close(bn.moving_variance(), vec(mv), {1e-6, 1e-7}));
}

TEST(BatchNormalizationLayerTest, InferenceUsesMovingStatistics) {
  set_seed(32);
  layers::BatchNormalization bn({.momentum = 0.9, .epsilon = 1e-5});
  const Tensor x = random_normal({6, 3});  // rank 2 (batch, features) works too
  // Default (training = false) with fresh statistics: x / sqrt(1 + eps).
  const Tensor y0 = bn(x);
  EXPECT_TRUE(
      all_close(y0, normalize(x, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1e-5), {1e-6, 1e-6}));
  const std::vector<double> mean = {0.5, -0.25, 2}, var = {4, 0.25, 1.5};
  bn.set_weights({vec(kGamma), vec(kBeta), vec(mean), vec(var)});
  EXPECT_TRUE(all_close(bn(x), normalize(x, mean, var, kGamma, kBeta, 1e-5), {1e-5, 1e-6}));
  // Inference does not touch the statistics.
  EXPECT_EQ(bn.moving_mean().to_vector<double>(), mean);
  EXPECT_EQ(bn.momentum(), 0.9);
  EXPECT_EQ(bn.epsilon(), 1e-5);
}

TEST(BatchNormalizationLayerTest, FrozenLayerRunsInInferenceModeAndKeepsItsStatistics) {
  set_seed(33);
  layers::BatchNormalization bn;
  const Tensor x = random_normal({8, 2, 2, 3}, 1.0, 2.0);
  bn(x);
  const std::vector<double> mean = {0.5, -0.25, 2}, var = {4, 0.25, 1.5};
  bn.set_weights({vec(kGamma), vec(kBeta), vec(mean), vec(var)});
  bn.set_trainable(false);
  const Tensor y = bn(x, {.training = true});
  EXPECT_TRUE(all_close(y, normalize(x, mean, var, kGamma, kBeta, 1e-3), {1e-5, 1e-6}));
  EXPECT_EQ(bn.moving_mean().to_vector<double>(), mean);
  EXPECT_EQ(bn.moving_variance().to_vector<double>(), var);
  EXPECT_TRUE(bn.trainable_variables().empty());
}

TEST(BatchNormalizationLayerTest, FrozenModelKeepsItsBatchNormInInferenceMode) {
  set_seed(34);
  auto in = Input({2, 2, 3});
  layers::BatchNormalization bn({.name = "base_bn"});
  Model base(in, bn(in), {.name = "base"});
  const std::vector<double> mean = {0.5, -0.25, 2}, var = {4, 0.25, 1.5};
  bn.set_weights({vec(kGamma), vec(kBeta), vec(mean), vec(var)});
  base.set_trainable(false);
  // Used as a layer inside a model trained with training = true (seed 000's
  // frozen base).
  auto outer_in = Input({2, 2, 3});
  Model outer(outer_in, base(outer_in));
  const Tensor x = random_normal({5, 2, 2, 3});
  const Tensor y = outer(x, {.training = true});
  EXPECT_TRUE(all_close(y, normalize(x, mean, var, kGamma, kBeta, 1e-3), {1e-5, 1e-6}));
  EXPECT_EQ(bn.moving_mean().to_vector<double>(), mean);
  EXPECT_EQ(bn.moving_variance().to_vector<double>(), var);
  // Unfrozen, the same call trains.
  base.set_trainable(true);
  outer(x, {.training = true});
  EXPECT_NE(bn.moving_mean().to_vector<double>(), mean);
}

TEST(BatchNormalizationLayerTest, MixedPoliciesKeepFloat32VariablesAndStatistics) {
  for (const char* policy : {"mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    PolicyGuard guard(policy);
    set_seed(35);
    layers::BatchNormalization bn;
    const Tensor x = random_normal({4, 4, 4, 3}, 1.0, 2.0);
    const Tensor y = bn(x, {.training = true});
    EXPECT_EQ(y.dtype(), mixed_precision::Policy(policy).compute_dtype());
    for (const Tensor& v : bn.variables()) EXPECT_EQ(v.dtype(), kFloat32);
    // The statistics are of the 16-bit input, computed in float32.
    const Stats s = stats_of(x.to(bn.compute_dtype()));
    std::vector<double> mm(3);
    for (std::size_t c = 0; c < 3; ++c) mm[c] = s.mean[c] * 0.01;
    EXPECT_TRUE(all_close(bn.moving_mean(), vec(mm), {1e-5, 1e-7}));
    // Gradients reach gamma and beta in float32.
    const auto g = grad(sum(bn(x, {.training = true}).to(kFloat32)), {bn.gamma(), bn.beta()});
    EXPECT_EQ(g[0].dtype(), kFloat32);
    EXPECT_EQ(g[1].dtype(), kFloat32);
    // d sum(y) / d beta = the number of values per channel.
    EXPECT_TRUE(all_close(g[1], vec({64, 64, 64}), {1e-6, 0}));
  }
}

double relative_rms(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += av[i] * av[i];
  }
  return std::sqrt(err / norm);
}

// Keras' _param_dtype: a pure 16-bit policy still gets float32 parameters and statistics, so
// the moving averages keep their small (1 - momentum) updates.
TEST(BatchNormalizationLayerTest, PureSixteenBitPoliciesKeepFloat32Variables) {
  for (const char* policy : {"float16", "bfloat16"}) {
    SCOPED_TRACE(policy);
    set_seed(37);
    layers::BatchNormalization bn({.momentum = 0.999, .dtype = policy});
    const Tensor x = random_normal({4, 3, 3, 2}, 1.0, 2.0);
    const Tensor y = bn(x, {.training = true});
    EXPECT_EQ(y.dtype(), mixed_precision::Policy(policy).compute_dtype());
    ASSERT_EQ(bn.variables().size(), 4u);
    for (const Tensor& v : bn.variables()) EXPECT_EQ(v.dtype(), kFloat32);
    // moving_variance = 0.999 * 1 + 0.001 * var: a step of ~1e-3 from 1, below bfloat16's spacing
    // near 1 (2^-7) and rounded by float16's (2^-10); float32 holds it to 1e-7.
    const Stats s = stats_of(x.to(bn.compute_dtype()));
    const auto mv = bn.moving_variance().to_vector<double>();
    const double n = 4 * 3 * 3;
    for (std::size_t c = 0; c < 2; ++c) {
      EXPECT_NEAR(mv[c], 0.999 + 0.001 * s.var[c] * n / (n - 1), 1e-6);
    }
    const auto g = grad(sum(bn(x, {.training = true}).to(kFloat32)), {bn.gamma(), bn.beta()});
    EXPECT_EQ(g[0].dtype(), kFloat32);
    EXPECT_EQ(g[1].dtype(), kFloat32);
  }
}

TEST(BatchNormalizationLayerTest, MixedMatchesFloat32Within1e2) {
  set_seed(36);
  const Tensor x = random_normal({8, 5, 5, 4}, 3.0, 2.0);
  layers::BatchNormalization f32({.dtype = "float32"});
  f32(x);
  const std::vector<Tensor> w = {vec({1.5, 0.5, -2.0, 1}), vec({0.25, -1.0, 3.0, 0}),
                                 vec({3, 2.5, 3.5, 3}), vec({4, 3, 5, 4})};
  f32.set_weights(w);
  for (const char* policy : {"mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    layers::BatchNormalization low({.dtype = policy});
    low(x);
    low.set_weights(w);
    EXPECT_LE(relative_rms(f32(x), low(x)), 1e-2);  // inference
    EXPECT_LE(relative_rms(f32(x, {.training = true}), low(x, {.training = true})), 1e-2);
  }
}

TEST(BatchNormalizationLayerTest, VariablesFlagsAndCounts) {
  layers::BatchNormalization bn({.name = "bn"});
  bn(Input({4, 4, 16}));
  // Keras: 4 * 16 = 64 parameters, 32 of them trainable.
  EXPECT_EQ(bn.count_params(), 64);
  ASSERT_EQ(bn.trainable_variables().size(), 2u);
  ASSERT_EQ(bn.non_trainable_variables().size(), 2u);
  const auto named = bn.named_variables();
  ASSERT_EQ(named.size(), 4u);
  EXPECT_EQ(named[0].name, "bn/gamma");
  EXPECT_EQ(named[1].name, "bn/beta");
  EXPECT_EQ(named[2].name, "bn/moving_mean");
  EXPECT_EQ(named[3].name, "bn/moving_variance");
  EXPECT_FALSE(named[2].trainable);
  EXPECT_FALSE(bn.moving_mean().requires_grad());
  for (double v : bn.gamma().to_vector<double>()) EXPECT_EQ(v, 1.0);
  for (double v : bn.moving_variance().to_vector<double>()) EXPECT_EQ(v, 1.0);
  // Without center and scale only the statistics remain; y = (x - mean) /
  // sqrt(var + eps).
  layers::BatchNormalization plain({.center = false, .scale = false});
  const Tensor x = random_normal({3, 2});
  EXPECT_TRUE(
      all_close(plain(x), normalize(x, {0, 0}, {1, 1}, {1, 1}, {0, 0}, 1e-3), {1e-6, 1e-6}));
  EXPECT_EQ(plain.variables().size(), 2u);
  EXPECT_FALSE(plain.gamma().defined());
  EXPECT_TRUE(plain.trainable_variables().empty());
}

TEST(BatchNormalizationLayerTest, Errors) {
  expect_error<ValueError>([] { layers::BatchNormalization({.momentum = 1.5}); },
                           {"momentum", "[0, 1]"});
  expect_error<ValueError>([] { layers::BatchNormalization({.epsilon = 0}); },
                           {"epsilon", "positive"});
  expect_error<ValueError>(
      [] {
        layers::BatchNormalization({.axis = 1, .name = "bn_axis"})(Input({4, 4, 3}));
      },
      {"bn_axis", "last axis", "axis = 1"});
  layers::BatchNormalization bn({.name = "bn_ch"});
  bn(Input({4, 4, 32}));
  expect_error<ShapeError>(
      [&] {
        bn(Input({4, 4, 64}));
      },
      {"bn_ch", "32 channels", "(None, 4, 4, 64)"});
  expect_error<ValueError>([] { layers::BatchNormalization({.name = "bn_unbuilt"}).moving_mean(); },
                           {"bn_unbuilt", "built"});
}

}  // namespace
}  // namespace mixprec
