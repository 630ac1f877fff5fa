// The histogram of a set of values as TensorBoard's HistogramProto holds it: min, max, count, sum,
// sum of squares, and buckets given by their upper limits.
//
// Buckets: TensorBoard's classic exponential buckets (the ones TensorFlow's C++ histogram and
// tf.compat.v1.summary.histogram use), not the 30 equal-width buckets of the TF2 summary ops.
// Limits are 0 and +-1e-12 * 1.1^k up to 1e20, plus +-DBL_MAX: every bucket is 10% wide relative to
// its magnitude, so one histogram resolves weights around 0.1 and gradients around 1e-7 alike. With
// mixed precision that is the point of looking: whether gradients sit near float16's underflow
// (6e-8) is invisible in 30 equal-width buckets that also have to span the largest weight, and one
// outlier squeezes equal-width buckets into one. TensorBoard re-bins for display anyway.
//
// Only the buckets from the first non-empty one to the last non-empty one are kept, and a run of
// empty buckets between them becomes one empty bucket (its limit the run's last limit), as
// TensorFlow encodes them; so a histogram has at most twice as many buckets as distinct occupied
// ones. Bucket i holds the values v with limit[i-1] <= v < limit[i] (the first bucket starts at
// min; TensorBoard reads the last one as ending at max).
//
// Non-finite values are left out (counted in `dropped`): NaN has no bucket and would make min,
// max and the sums NaN, which TensorBoard cannot draw. With no finite value at all the histogram
// is num = 0, min = max = 0, and one empty bucket with limit 0 (TensorBoard needs at least one).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mixprec::io {

struct Histogram {
  double min = 0.0;
  double max = 0.0;
  double num = 0.0;
  double sum = 0.0;
  double sum_squares = 0.0;
  std::vector<double> bucket_limit;  // increasing
  std::vector<double> bucket;        // counts, same length as bucket_limit
  std::int64_t dropped = 0;          // non-finite values left out (not part of the proto)
};

// The exponential bucket limits, increasing: -DBL_MAX, -1e20.., ..-1e-12, 0, 1e-12.., ..1e20,
// DBL_MAX.
const std::vector<double>& default_bucket_limits();

Histogram make_histogram(std::span<const float> values);

}  // namespace mixprec::io
