// Error bounds of reductions for the tests that compare a result with a reference elementwise
// (DESIGN §4's method): a sum of products computed in float32 in any order differs from the exact
// sum by at most c * n * u32 * sum |terms|, and each rounding of a result to its dtype adds
// u_dtype * |result|. An elementwise relative tolerance alone is the wrong oracle for long
// reductions: their float32 error scales with M = sum |terms|, not with the (possibly cancelled)
// result. within_bound checks a bound the caller composed; within_summation_bound is the common
// case of one float32 summation and one rounding of the result; within_reduction_bound compares
// two results of unknown summation orders (SummationBound).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"  // Tolerance

namespace mixprec::testing {

// Half the spacing of the dtype's numbers relative to a value: 2^-11 (float16), 2^-8 (bfloat16),
// 2^-24 (float32).
inline double unit_roundoff(DType dtype) {
  if (dtype == DType::float16) return std::ldexp(1.0, -11);
  if (dtype == DType::bfloat16) return std::ldexp(1.0, -8);
  return std::ldexp(1.0, -24);
}

// The absolute error of one rounding to `dtype` below its normal range (float16's subnormal
// spacing is 2^-24: half of it; the other dtypes' are far below any value the tests compare).
inline double subnormal_floor(DType dtype) {
  return dtype == DType::float16 ? std::ldexp(1.0, -25) : 1e-300;
}

// |got - ref| <= bound[i] for every element i (got and ref on the CPU, any floating dtypes).
inline ::testing::AssertionResult within_bound(const Tensor& got, const Tensor& ref,
                                               const std::vector<double>& bound) {
  const auto a = got.to_vector<double>(), e = ref.to_vector<double>();
  if (a.size() != e.size() || a.size() != bound.size()) {
    return ::testing::AssertionFailure()
           << "sizes " << a.size() << ", " << e.size() << " and bound " << bound.size();
  }
  std::size_t worst = 0, failures = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - e[i]);
    const double ratio = bound[i] > 0 ? error / bound[i] : (error > 0 ? INFINITY : 0.0);
    if (!(error <= bound[i])) ++failures;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << a.size() << " elements outside the bound; worst at flat index "
         << worst << ": " << a[worst] << " vs " << e[worst] << " (bound " << bound[worst]
         << ", error/bound " << worst_ratio << ")";
}

// |got - exact| <= 1.01 * terms * u32 * magnitude (a float32 summation of `terms` terms) +
// u_out * |exact| (one rounding to got's dtype), elementwise.
inline ::testing::AssertionResult within_summation_bound(const Tensor& got, const Tensor& exact,
                                                         const Tensor& magnitude, double terms) {
  const auto e = exact.to_vector<double>(), m = magnitude.to_vector<double>();
  if (e.size() != m.size()) return ::testing::AssertionFailure() << "size " << m.size();
  const double u_out = unit_roundoff(got.dtype());
  std::vector<double> bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    bound[i] = 1.01 * terms * std::ldexp(1.0, -24) * m[i] + u_out * std::abs(e[i]) +
               subnormal_floor(got.dtype());
  }
  return within_bound(got, exact, bound);
}

// Two float32-accumulated results of unknown order compared elementwise:
//   |got - ref| <= float32_ulps * u32 * M + dtype_ulps * u_dtype * M + rtol * |ref| + atol,
// float32_ulps covering both sides' float32 summation, dtype_ulps the terms one side rounds to the
// 16-bit dtype before summing, and (rtol, atol) the final rounding of each side to the output
// dtype.
struct SummationBound {
  double float32_ulps = 0;  // multiples of u32 * M
  double dtype_ulps = 0;    // multiples of u_dtype * M (16-bit intermediates on one side)
  Tolerance output{0, 0};   // (rtol, atol) of the final rounding(s) to the output dtype
};

// got and ref on the host, magnitude (float64) of their shape.
inline ::testing::AssertionResult within_reduction_bound(const Tensor& got, const Tensor& ref,
                                                         const Tensor& magnitude,
                                                         const SummationBound& b) {
  const auto e = ref.to_vector<double>(), m = magnitude.to_vector<double>();
  if (m.size() != e.size()) return ::testing::AssertionFailure() << "size " << m.size();
  const double per_m =
      b.float32_ulps * unit_roundoff(DType::float32) + b.dtype_ulps * unit_roundoff(got.dtype());
  std::vector<double> bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    bound[i] = per_m * m[i] + b.output.rtol * std::abs(e[i]) + b.output.atol;
  }
  return within_bound(got, ref, bound);
}

}  // namespace mixprec::testing
