// Seeded generator: repeatability and statistical properties of uniform, normal and below(n).
// Bounds are about 5 standard errors wide, so a correct generator fails them with probability
// well under 1e-5 for any seed, while a broken transform (wrong scale, shift, bias) fails them.
#include "mixprec/random.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

TEST(RandomTest, SameSeedSameSequence) {
  Generator a(42), b(42), c(43);
  bool differs_from_other_seed = false;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs_from_other_seed |= x != c.next_u64();
  }
  EXPECT_TRUE(differs_from_other_seed);
  for (int i = 0; i < 1001; ++i) {  // odd count: exercises the Box-Muller spare
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.normal()), std::bit_cast<std::uint64_t>(b.normal()));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.uniform()), std::bit_cast<std::uint64_t>(b.uniform()));
    EXPECT_EQ(a.below(1000), b.below(1000));
  }
}

TEST(RandomTest, ReseedingRestartsTheSequence) {
  Generator g(7);
  std::vector<double> first;
  g.normal();  // leaves a spare behind: seed() must drop it
  for (int i = 0; i < 5; ++i) first.push_back(g.normal());
  g.seed(7);
  g.normal();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(g.normal(), first[static_cast<std::size_t>(i)]);

  Generator h(7);
  h.normal();  // spare pending
  h.seed(7);
  Generator fresh(7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.normal(), fresh.normal());
}

TEST(RandomTest, SetSeedMakesRandomTensorsRepeatable) {
  set_seed(123);
  const auto a = random_normal({257}, 1.0, 2.0, {.dtype = kFloat64}).to_vector<double>();
  const auto u = random_uniform({33}, -1.0, 1.0).to_vector<float>();
  set_seed(123);
  const auto b = random_normal({257}, 1.0, 2.0, {.dtype = kFloat64}).to_vector<double>();
  const auto v = random_uniform({33}, -1.0, 1.0).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a[i]), std::bit_cast<std::uint64_t>(b[i]));
  }
  EXPECT_EQ(u, v);
  set_seed(124);
  EXPECT_NE(random_normal({257}, 1.0, 2.0, {.dtype = kFloat64}).to_vector<double>(), a);
}

TEST(RandomTest, TensorsMatchTheGeneratorInRowMajorOrder) {
  Generator g1(5), g2(5);
  const auto t = random_normal({4, 5}, 3.0, 0.5, {.dtype = kFloat64}, g1).to_vector<double>();
  for (double v : t) EXPECT_EQ(v, 3.0 + 0.5 * g2.normal());
  const auto u = random_uniform({9}, 2.0, 4.0, {.dtype = kFloat64}, g1).to_vector<double>();
  for (double v : u) EXPECT_EQ(v, 2.0 + 2.0 * g2.uniform());
  // 16-bit tensors hold the same samples rounded once.
  Generator g3(9), g4(9);
  const auto h = random_normal({64}, 0.0, 1.0, {.dtype = kFloat16}, g3).to_vector<float16>();
  for (const float16& v : h) EXPECT_EQ(v.bits, float16(static_cast<float>(g4.normal())).bits);
}

TEST(RandomTest, NormalHasMeanZeroAndUnitStd) {
  Generator g(2024);
  constexpr int kN = 1'000'000;
  double sum = 0, sum_sq = 0, sum_cube = 0;
  int within_one = 0;
  for (int i = 0; i < kN; ++i) {
    const double x = g.normal();
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum_sq += x * x;
    sum_cube += x * x * x;
    within_one += std::abs(x) < 1.0;
  }
  const double mean = sum / kN;
  const double var = sum_sq / kN - mean * mean;
  // Standard errors: mean 1e-3, variance sqrt(2/N) = 1.4e-3, third moment sqrt(15/N) = 3.9e-3.
  EXPECT_NEAR(mean, 0.0, 5e-3);
  EXPECT_NEAR(std::sqrt(var), 1.0, 4e-3);
  EXPECT_NEAR(sum_cube / kN, 0.0, 2e-2);
  // P(|x| < 1) = erf(1/sqrt 2) = 0.682689; standard error 4.7e-4.
  EXPECT_NEAR(static_cast<double>(within_one) / kN, std::erf(1.0 / std::sqrt(2.0)), 2.5e-3);
}

TEST(RandomTest, RandomNormalTensorHasRequestedMoments) {
  Generator g(11);
  const auto v = random_normal({1000, 1000}, 3.0, 0.5, {.dtype = kFloat32}, g).to_vector<double>();
  double sum = 0, sum_sq = 0;
  for (double x : v) sum += x, sum_sq += x * x;
  const double mean = sum / static_cast<double>(v.size());
  const double std = std::sqrt(sum_sq / static_cast<double>(v.size()) - mean * mean);
  EXPECT_NEAR(mean, 3.0, 2.5e-3);
  EXPECT_NEAR(std, 0.5, 2e-3);
  EXPECT_THROW(random_normal({2}, 0.0, -1.0), ValueError);
  EXPECT_THROW(random_normal({2}, 0.0, 1.0, {.dtype = kInt32}), DTypeError);
}

TEST(RandomTest, UniformIsInUnitIntervalAndFlat) {
  Generator g(99);
  constexpr int kN = 1'000'000;
  constexpr int kBins = 16;
  std::vector<int> bins(kBins, 0);
  double sum = 0, sum_sq = 0;
  double lo = 1, hi = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = g.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
    sum_sq += u * u;
    ++bins[static_cast<std::size_t>(u * kBins)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 1.5e-3);           // standard error 2.9e-4
  EXPECT_NEAR(sum_sq / kN, 1.0 / 3.0, 1.5e-3);  // standard error 3e-4
  EXPECT_LT(lo, 1e-4);
  EXPECT_GT(hi, 1 - 1e-4);
  // Chi-square with 15 degrees of freedom: 50 is far beyond the 0.9999 quantile (~44).
  double chi2 = 0;
  const double expected = static_cast<double>(kN) / kBins;
  for (int c : bins) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 50.0);
  // The 53 bits are really random: the low bit of u * 2^53 is set half of the time.
  int odd = 0;
  for (int i = 0; i < 100000; ++i) odd += static_cast<std::uint64_t>(g.uniform() * 0x1p53) & 1u;
  EXPECT_NEAR(odd / 1e5, 0.5, 8e-3);
}

TEST(RandomTest, RandomUniformTensorRespectsBounds) {
  Generator g(3);
  const auto v = random_uniform({10000}, -2.0, 6.0, {.dtype = kFloat64}, g).to_vector<double>();
  double sum = 0;
  for (double x : v) {
    ASSERT_GE(x, -2.0);
    ASSERT_LT(x, 6.0);
    sum += x;
  }
  EXPECT_NEAR(sum / 1e4, 2.0, 0.12);  // standard error 8 / sqrt(12e4) = 0.023
  EXPECT_THROW(random_uniform({2}, 1.0, 0.0), ValueError);
  const auto same = random_uniform({3}, 5.0, 5.0).to_vector<double>();
  EXPECT_EQ(same, std::vector<double>(3, 5.0));
}

TEST(RandomTest, BelowIsInRangeAndUnbiased) {
  Generator g(17);
  EXPECT_EQ(g.below(0), 0u);
  EXPECT_EQ(g.below(1), 0u);
  // n = 3 does not divide 2^64; a biased modulo would still pass a chi-square at this size, so
  // also check a large n where modulo bias is visible: n = 3 * 2^62 maps 2^64 values so that
  // x % n < 2^62 is twice as likely as the rest without rejection.
  constexpr int kN = 300000;
  std::vector<int> counts(3, 0);
  for (int i = 0; i < kN; ++i) {
    const std::uint64_t v = g.below(3);
    ASSERT_LT(v, 3u);
    ++counts[v];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - kN / 3.0) * (c - kN / 3.0) / (kN / 3.0);
  EXPECT_LT(chi2, 25.0);  // 2 degrees of freedom; 0.99999 quantile is 23

  const std::uint64_t big = 3ull << 62;
  int low_third = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = g.below(big);
    ASSERT_LT(v, big);
    low_third += v < (1ull << 62);
  }
  EXPECT_NEAR(low_third / 1e5, 1.0 / 3.0, 8e-3);  // a plain modulo would give 1/2

  // Every value of a small range shows up.
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 1000; ++i) ++seen[g.below(7)];
  for (int c : seen) EXPECT_GT(c, 80);
}

TEST(RandomTest, DefaultGeneratorIsTheOneSetSeedReseeds) {
  set_seed(55);
  const std::uint64_t a = default_generator().next_u64();
  Generator g(55);
  EXPECT_EQ(a, g.next_u64());
}

}  // namespace
}  // namespace mixprec
