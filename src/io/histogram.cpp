// Histograms for TensorBoard (src/io/histogram.h).
#include "io/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace mixprec::io {

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return limits;
}

Histogram make_histogram(std::span<const float> values) {
  const std::vector<double>& limits = default_bucket_limits();
  Histogram h;
  std::vector<double> counts(limits.size(), 0.0);
  double lo = 0.0;
  double hi = 0.0;
  for (float f : values) {
    if (!std::isfinite(f)) {
      ++h.dropped;
      continue;
    }
    const double v = f;
    if (h.num == 0.0) {
      lo = hi = v;
    } else {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    h.num += 1.0;
    // Sums in double: a float32's square (< 1.2e77) and any realistic count of them stay finite.
    h.sum += v;
    h.sum_squares += v * v;
    // The first limit above v; v < DBL_MAX (the last limit), so the index is in range.
    const auto at = std::upper_bound(limits.begin(), limits.end(), v);
    counts[static_cast<std::size_t>(at - limits.begin())] += 1.0;
  }
  if (h.num == 0.0) {
    h.bucket_limit = {0.0};
    h.bucket = {0.0};
    return h;
  }
  h.min = lo;
  h.max = hi;
  std::size_t first = 0;
  while (counts[first] == 0.0) ++first;
  std::size_t last = counts.size() - 1;
  while (counts[last] == 0.0) --last;
  for (std::size_t i = first; i <= last;) {
    if (counts[i] > 0.0) {
      h.bucket_limit.push_back(limits[i]);
      h.bucket.push_back(counts[i]);
      ++i;
      continue;
    }
    // A run of empty buckets between occupied ones: one empty bucket up to the run's last limit.
    while (counts[i] == 0.0) ++i;  // stops at an occupied bucket (<= last)
    h.bucket_limit.push_back(limits[i - 1]);
    h.bucket.push_back(0.0);
  }
  return h;
}

}  // namespace mixprec::io
