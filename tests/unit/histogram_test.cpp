// Histograms for TensorBoard (src/io/histogram.h): the exponential bucket limits, which bucket a
// value lands in, the collapsing of empty buckets, statistics, and non-finite values.
#include "io/histogram.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace mixprec::io {
namespace {

TEST(HistogramTest, DefaultLimitsAreSymmetricTenPercentSteps) {
  const std::vector<double>& l = default_bucket_limits();
  ASSERT_EQ(l.size() % 2, 1u);
  const std::size_t zero = l.size() / 2;
  EXPECT_EQ(l[zero], 0.0);
  EXPECT_EQ(l.front(), -DBL_MAX);
  EXPECT_EQ(l.back(), DBL_MAX);
  EXPECT_EQ(l[zero + 1], 1e-12);
  for (std::size_t i = 1; i < l.size(); ++i) {
    ASSERT_LT(l[i - 1], l[i]) << i;
    EXPECT_EQ(l[i], -l[l.size() - 1 - i]);
  }
  // 1e-12 * 1.1^k below 1e20: k = 0..773.
  EXPECT_EQ(l.size(), 2 * (774 + 1) + 1);
  for (std::size_t i = zero + 2; i + 1 < l.size(); ++i) EXPECT_NEAR(l[i] / l[i - 1], 1.1, 1e-12);
  EXPECT_LT(l[l.size() - 2], 1e20);
  EXPECT_GT(l[l.size() - 2] * 1.1, 1e20 * (1 - 1e-12));
}

TEST(HistogramTest, AValueLandsInTheBucketWhoseLimitIsTheFirstAboveIt) {
  const std::vector<double>& l = default_bucket_limits();
  const std::size_t zero = l.size() / 2;
  // Zero: [0, 1e-12).
  Histogram h = make_histogram(std::vector<float>{0.0f});
  ASSERT_EQ(h.bucket_limit.size(), 1u);
  EXPECT_EQ(h.bucket_limit[0], 1e-12);
  EXPECT_EQ(h.bucket[0], 1.0);
  EXPECT_EQ(h.min, 0.0);
  EXPECT_EQ(h.max, 0.0);
  // 1.0 lies in [1.1^k-ish limits]: the limit is the smallest one above 1.0.
  h = make_histogram(std::vector<float>{1.0f});
  ASSERT_EQ(h.bucket_limit.size(), 1u);
  EXPECT_GT(h.bucket_limit[0], 1.0);
  EXPECT_LT(h.bucket_limit[0], 1.1);
  // Negative values: [-limit, ...) with the limit the next one towards +inf.
  h = make_histogram(std::vector<float>{-1.0f});
  ASSERT_EQ(h.bucket_limit.size(), 1u);
  EXPECT_GE(h.bucket_limit[0], -1.0);
  EXPECT_LT(h.bucket_limit[0] - -1.0, 0.1);
  // Float32's largest value is above 1e20: the DBL_MAX bucket.
  h = make_histogram(std::vector<float>{std::numeric_limits<float>::max()});
  EXPECT_EQ(h.bucket_limit, std::vector<double>{DBL_MAX});
  // A value equal to a limit belongs to the bucket above it (buckets are [lower, upper)).
  const auto on_limit = static_cast<float>(l[zero + 300]);
  const auto it = std::upper_bound(l.begin(), l.end(), static_cast<double>(on_limit));
  h = make_histogram(std::vector<float>{on_limit});
  EXPECT_EQ(h.bucket_limit, std::vector<double>{*it});
  EXPECT_GT(*it, static_cast<double>(on_limit));
}

TEST(HistogramTest, StatisticsAndCollapsedEmptyRuns) {
  const std::vector<float> values = {1.0f, 1.0f, -1.0f, 2.0f, 1e-3f};
  const Histogram h = make_histogram(values);
  EXPECT_EQ(h.num, 5.0);
  EXPECT_EQ(h.min, -1.0);
  EXPECT_EQ(h.max, 2.0);
  EXPECT_DOUBLE_EQ(h.sum, 3.0 + double(1e-3f));
  EXPECT_DOUBLE_EQ(h.sum_squares, 7.0 + double(1e-3f) * double(1e-3f));
  EXPECT_EQ(h.dropped, 0);
  ASSERT_EQ(h.bucket.size(), h.bucket_limit.size());
  EXPECT_EQ(std::accumulate(h.bucket.begin(), h.bucket.end(), 0.0), 5.0);
  // Four occupied buckets (-1, 1e-3, 1 twice, 2) with one collapsed empty run between each pair.
  ASSERT_EQ(h.bucket.size(), 7u);
  EXPECT_EQ(h.bucket, (std::vector<double>{1, 0, 1, 0, 2, 0, 1}));
  for (std::size_t i = 1; i < h.bucket_limit.size(); ++i)
    EXPECT_LT(h.bucket_limit[i - 1], h.bucket_limit[i]);
  EXPECT_GT(h.bucket_limit[0], h.min);
  EXPECT_GT(h.bucket_limit.back(), h.max);
  // Each occupied bucket's lower edge (the previous limit, or the default limit below it) is at
  // or under its values: the bucket of 2.0 starts above 1.0's bucket.
  EXPECT_LE(h.bucket_limit[5], 2.0);
  EXPECT_GT(h.bucket_limit[4], 1.0);
  EXPECT_LE(h.bucket_limit[3], 1.0);
}

TEST(HistogramTest, NonFiniteValuesAreLeftOut) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Histogram h = make_histogram(std::vector<float>{nan, 3.0f, -inf, inf, -0.5f});
  EXPECT_EQ(h.dropped, 3);
  EXPECT_EQ(h.num, 2.0);
  EXPECT_EQ(h.min, -0.5);
  EXPECT_EQ(h.max, 3.0);
  EXPECT_EQ(h.sum, 2.5);
  EXPECT_EQ(h.sum_squares, 9.25);
  for (double v : h.bucket_limit) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(std::accumulate(h.bucket.begin(), h.bucket.end(), 0.0), 2.0);
}

TEST(HistogramTest, NoFiniteValueGivesOneEmptyBucket) {
  for (const std::vector<float>& values :
       {std::vector<float>{}, std::vector<float>{std::numeric_limits<float>::quiet_NaN()}}) {
    const Histogram h = make_histogram(values);
    EXPECT_EQ(h.num, 0.0);
    EXPECT_EQ(h.min, 0.0);
    EXPECT_EQ(h.max, 0.0);
    EXPECT_EQ(h.sum, 0.0);
    EXPECT_EQ(h.bucket_limit, std::vector<double>{0.0});
    EXPECT_EQ(h.bucket, std::vector<double>{0.0});
    EXPECT_EQ(h.dropped, static_cast<std::int64_t>(values.size()));
  }
}

TEST(HistogramTest, ManyValuesKeepTheCountAndStayCompact) {
  std::vector<float> values;
  for (int i = 0; i < 10000; ++i) values.push_back(std::sin(0.37f * static_cast<float>(i)) * 0.05f);
  const Histogram h = make_histogram(values);
  EXPECT_EQ(h.num, 10000.0);
  EXPECT_EQ(std::accumulate(h.bucket.begin(), h.bucket.end(), 0.0), 10000.0);
  // Never two empty buckets in a row, never an empty bucket at either end.
  EXPECT_GT(h.bucket.front(), 0.0);
  EXPECT_GT(h.bucket.back(), 0.0);
  for (std::size_t i = 1; i < h.bucket.size(); ++i)
    EXPECT_FALSE(h.bucket[i - 1] == 0.0 && h.bucket[i] == 0.0) << i;
}

}  // namespace
}  // namespace mixprec::io
