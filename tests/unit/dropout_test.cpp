// Dropout: identity outside training; in training every element is 0 or x / (1 - rate), about a
// `rate` fraction are zero, gradients follow the same mask, and seeds make masks repeatable.
#include "mixprec/layers/dropout.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/counter_hash.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;

using testing::PolicyGuard;

// An independent model of the mask rule (DESIGN: the mask is counter-based): element i of a call
// keyed by `base` draws splitmix64's output z = mix(base + (i + 1) * gamma) and is kept when the
// uniform double (z >> 11) * 2^-53 is >= rate, as Generator::uniform() >= rate would decide.
std::uint64_t model_hash(std::uint64_t base, std::uint64_t i) {
  std::uint64_t z = base + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
bool model_keeps(std::uint64_t base, std::uint64_t i, double rate) {
  return static_cast<double>(model_hash(base, i) >> 11) * 0x1.0p-53 >= rate;
}
// The key of a seeded layer's first call: the first next_u64() of a Generator with that seed.
std::uint64_t first_key(std::uint64_t seed) { return Generator(seed).next_u64(); }

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
  // 300000 elements: filled by several threads.
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
  // Neighbouring blocks of the mask are not copies of each other.
  EXPECT_FALSE(std::equal(ya.begin(), ya.begin() + 65536, ya.begin() + 65536));
}

TEST(DropoutTest, MaskIsTheCounterBasedModel) {
  // Two calls of a seeded layer: keys are the generator's first and second next_u64().
  for (const DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    PolicyGuard guard(dtype_name(dtype));  // the layer computes (and masks) in this dtype
    const double rate = 0.35;
    layers::Dropout d(rate, {.seed = 2024});
    Generator keys(2024);
    const double keep = scalar(1.0 / (1.0 - rate), {.dtype = dtype}).to_vector<double>()[0];
    for (int call = 0; call < 2; ++call) {
      const std::uint64_t base = keys.next_u64();
      const Tensor out = d(ones({37, 91}, {.dtype = dtype}), {.training = true});
      ASSERT_EQ(out.dtype(), dtype);
      const auto y = out.to_vector<double>();
      ASSERT_EQ(y.size(), 37u * 91u);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        mismatches += y[i] != (model_keeps(base, i, rate) ? keep : 0.0);
      }
      EXPECT_EQ(mismatches, 0u) << "call " << call;
    }
  }
}

TEST(DropoutTest, MaskFollowsTheRowMajorIndexOfStridedInputs) {
  // A transposed input: element (r, c) of the input is flat index r * 5 + c of the mask.
  const double rate = 0.5;
  layers::Dropout d(rate, {.seed = 8});
  const Tensor base_values = random_uniform({5, 6}, 1.0, 2.0);
  const Tensor x = base_values.transpose(0, 1);  // (6, 5), not contiguous
  const auto xv = x.contiguous().to_vector<double>();
  const auto y = d(x, {.training = true}).to_vector<double>();
  const std::uint64_t key = first_key(8);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double expected =
        model_keeps(key, i, rate)
            ? static_cast<double>(static_cast<float>(static_cast<float>(xv[i]) * 2.0f))
            : 0.0;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(DropoutTest, ThresholdIsTheSmallestKeptDraw) {
  // keep_threshold(rate) = the smallest 53-bit k with k * 2^-53 >= rate (exact doubles).
  for (const double rate : {0.0, 1e-300, 0x1.0p-53, 0x1.8p-53, 0.1, 0.25, 1.0 / 3.0, 0.5, 0.7,
                            0.9999, 1.0 - 0x1.0p-53}) {
    const std::uint64_t t = core::keep_threshold(rate);
    EXPECT_GE(static_cast<double>(t) * 0x1.0p-53, rate) << rate;
    if (t > 0) EXPECT_LT(static_cast<double>(t - 1) * 0x1.0p-53, rate) << rate;
    EXPECT_LE(t, std::uint64_t{1} << 53) << rate;
  }
  EXPECT_EQ(core::keep_threshold(0.0), 0u);
  EXPECT_EQ(core::keep_threshold(0.5), std::uint64_t{1} << 52);
  // The header's hash is the model's (a copy of the constants here).
  for (std::uint64_t i : {0ull, 1ull, 12345ull, 0xFFFFFFFFFFFFFFFFull}) {
    EXPECT_EQ(core::counter_hash(0x1234, i), model_hash(0x1234, i)) << i;
  }
}

TEST(DropoutTest, KeptFractionIsWithinBinomialBounds) {
  const std::int64_t n = 200000;
  for (const double rate : {0.05, 0.5, 0.9}) {
    layers::Dropout d(rate, {.seed = 31});
    const auto y = d(ones({n}), {.training = true}).to_vector<double>();
    std::size_t dropped = 0;
    for (double v : y) dropped += v == 0;
    // Binomial(n, rate): allow 5 standard deviations.
    const double sd = std::sqrt(static_cast<double>(n) * rate * (1 - rate));
    EXPECT_NEAR(static_cast<double>(dropped), rate * static_cast<double>(n), 5 * sd) << rate;
  }
}

TEST(DropoutTest, ThreadCountDoesNotChangeTheMask) {
  const Tensor x = ones({1 << 17});
  const int threads = omp_get_max_threads();
  std::vector<std::vector<double>> masks;
  for (int t : {1, 2, 3, 7}) {
    omp_set_num_threads(t);
    layers::Dropout d(0.2, {.seed = 5});
    masks.push_back(d(x, {.training = true}).to_vector<double>());
  }
  omp_set_num_threads(threads);
  for (std::size_t k = 1; k < masks.size(); ++k) EXPECT_EQ(masks[k], masks[0]) << k;
  const std::uint64_t key = first_key(5);
  const double keep = static_cast<double>(static_cast<float>(1.0 / 0.8));
  for (std::size_t i = 0; i < masks[0].size(); i += 997) {
    EXPECT_EQ(masks[0][i], model_keeps(key, i, 0.2) ? keep : 0.0) << i;
  }
}

TEST(DropoutTest, DroppedInfAndNanStayNan) {
  // A dropped element is x * 0, so an overflowed value is not hidden from loss scaling.
  layers::Dropout d(0.5, {.seed = 12});
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = i % 2 ? inf : std::nan("");
  const auto y = d(from_vector(values, {64}), {.training = true}).to_vector<double>();
  const std::uint64_t key = first_key(12);
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (model_keeps(key, i, 0.5) && i % 2) {
      EXPECT_EQ(y[i], inf) << i;
    } else {
      EXPECT_TRUE(std::isnan(y[i])) << i << " " << y[i];
    }
  }
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
