// The error bound of a reduction computed in float32 in an order the test does not know (cuDNN's,
// oneDNN's, the library's reduce kernels), compared elementwise with another such result:
//   |got - ref| <= float32_ulps * u32 * M + dtype_ulps * u_dtype * M + rtol * |ref| + atol,
// where M = sum_k |term_k| for that element (the same op on absolute values), float32_ulps covers
// both sides' float32 summation, dtype_ulps the terms one side rounds to the 16-bit dtype before
// summing, and (rtol, atol) the final rounding of each side to the output dtype. An elementwise
// relative tolerance alone is the wrong oracle for long reductions: their float32 error scales
// with M, not with the (possibly cancelled) result.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"  // Tolerance

namespace mixprec::testing {

inline double unit_roundoff(DType dtype) {
  if (dtype == DType::float16) return std::ldexp(1.0, -11);
  if (dtype == DType::bfloat16) return std::ldexp(1.0, -8);
  return std::ldexp(1.0, -24);
}

struct SummationBound {
  double float32_ulps = 0;  // multiples of u32 * M
  double dtype_ulps = 0;    // multiples of u_dtype * M (16-bit intermediates on one side)
  Tolerance output{0, 0};   // (rtol, atol) of the final rounding(s) to the output dtype
};

// got and ref on the host, magnitude (float64) of their shape.
inline ::testing::AssertionResult within_reduction_bound(const Tensor& got, const Tensor& ref,
                                                         const Tensor& magnitude,
                                                         const SummationBound& b) {
  const auto a = got.to(DType::float64).to_vector<double>();
  const auto e = ref.to(DType::float64).to_vector<double>();
  const auto m = magnitude.to(DType::float64).to_vector<double>();
  if (a.size() != e.size() || m.size() != e.size()) {
    return ::testing::AssertionFailure()
           << "sizes " << a.size() << ", " << e.size() << ", " << m.size();
  }
  const double per_m =
      b.float32_ulps * unit_roundoff(DType::float32) + b.dtype_ulps * unit_roundoff(got.dtype());
  std::size_t bad = 0, worst = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double bound = per_m * m[i] + b.output.rtol * std::abs(e[i]) + b.output.atol;
    const double ratio = std::abs(a[i] - e[i]) / bound;
    if (!(ratio <= 1.0)) ++bad;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.size() << " elements outside the bound; worst at flat index "
         << worst << ": " << a[worst] << " vs expected " << e[worst] << ", magnitude sum "
         << m[worst] << ", " << worst_ratio << " times the bound";
}

}  // namespace mixprec::testing
