// Dropout: identity outside training; in training every element is 0 or x / (1 - rate), about a
// `rate` fraction are zero, gradients follow the same mask, and seeds make masks repeatable.
#include "mixprec/layers/dropout.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;

using testing::PolicyGuard;

TEST(DropoutTest, IdentityWhenNotTraining) {
  layers::Dropout d(0.5);
  const Tensor x = random_normal({8, 16});
  EXPECT_EQ(d(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(d(x, {.training = false}).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(layers::Dropout(0.0)(x, {.training = true}).to_vector<double>(), x.to_vector<double>());
}

TEST(DropoutTest, TrainingZeroesAboutRateAndScalesTheRest) {
  const double rate = 0.3;
  layers::Dropout d(rate, {.seed = 7});
  const Tensor x = random_uniform({100, 200}, 0.5, 1.5);  // never zero
  const auto xv = x.to_vector<double>();
  const auto yv = d(x, {.training = true}).to_vector<double>();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) {
      ++dropped;
    } else {
      EXPECT_NEAR(yv[i], xv[i] / (1 - rate), 1e-6 * std::abs(yv[i])) << i;
    }
  }
  // 20000 Bernoulli(0.3) draws: standard deviation ~65; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(dropped), rate * 20000, 5 * 65);
}

TEST(DropoutTest, SameSeedSameMasksAndCallsDiffer) {
  const Tensor x = ones({4, 64});
  layers::Dropout a(0.5, {.seed = 123}), b(0.5, {.seed = 123}), c(0.5, {.seed = 124});
  const auto a1 = a(x, {.training = true}).to_vector<double>();
  const auto a2 = a(x, {.training = true}).to_vector<double>();
  const auto b1 = b(x, {.training = true}).to_vector<double>();
  const auto b2 = b(x, {.training = true}).to_vector<double>();
  const auto c1 = c(x, {.training = true}).to_vector<double>();
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2);  // a new mask each call
  EXPECT_NE(a1, c1);
}

TEST(DropoutTest, LargeMasksAreRepeatableAndIndependentOfThreads) {
  // 300000 elements: several chunks drawn in parallel.
  const Tensor x = ones({300, 1000});
  layers::Dropout a(0.4, {.seed = 77}), b(0.4, {.seed = 77});
  const auto ya = a(x, {.training = true}).to_vector<double>();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto yb = b(x, {.training = true}).to_vector<double>();
  omp_set_num_threads(threads);
  EXPECT_EQ(ya, yb);
  std::size_t dropped = 0;
  for (double v : ya) dropped += v == 0;
  // Binomial(300000, 0.4): standard deviation ~268; allow 5 of them.
  EXPECT_NEAR(static_cast<double>(dropped), 0.4 * 300000, 5 * 268);
  // Neighbouring chunks are not copies of each other.
  EXPECT_FALSE(std::equal(ya.begin(), ya.begin() + 65536, ya.begin() + 65536));
}

TEST(DropoutTest, UnseededMasksFollowSetSeed) {
  const Tensor x = ones({4, 64});
  layers::Dropout d(0.5);
  set_seed(99);
  const auto first = d(x, {.training = true}).to_vector<double>();
  set_seed(99);
  EXPECT_EQ(d(x, {.training = true}).to_vector<double>(), first);
}

TEST(DropoutTest, GradientUsesTheSameMask) {
  layers::Dropout d(0.25, {.seed = 3});
  Tensor x = random_uniform({8, 8}, 1, 2);
  x.set_requires_grad(true);
  const Tensor y = d(x, {.training = true});
  const auto g = grad(sum(y), {x})[0].to_vector<double>();
  const auto yv = y.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    // The kept scale is 1 / 0.75 rounded to float32, the compute dtype.
    EXPECT_EQ(g[i], yv[i] == 0 ? 0.0 : static_cast<double>(static_cast<float>(1.0 / 0.75))) << i;
  }
}

TEST(DropoutTest, MixedPolicyOutputsFloat16) {
  PolicyGuard guard("mixed_float16");
  layers::Dropout d(0.5, {.seed = 1});
  const Tensor y = d(full({2, 8}, 3.0), {.training = true});
  EXPECT_EQ(y.dtype(), kFloat16);
  for (double v : y.to_vector<double>()) EXPECT_TRUE(v == 0 || v == 6) << v;
  EXPECT_EQ(d(Input({8})).dtype(), kFloat16);
  EXPECT_EQ(d(Input({8})).shape(), (PartialShape{-1, 8}));
}

TEST(DropoutTest, RateOutsideZeroOneIsRejected) {
  for (double rate : {-0.1, 1.0, 1.5, std::nan("")}) {
    try {
      layers::Dropout d(rate);
      ADD_FAILURE() << "rate " << rate << " accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("[0, 1)"), std::string::npos) << e.what();
    }
  }
  EXPECT_DOUBLE_EQ(layers::Dropout(0.2).rate(), 0.2);
}

}  // namespace
}  // namespace mixprec
