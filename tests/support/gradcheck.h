// Test oracles shared by the op tests:
//  - gradcheck: analytic gradients against central finite differences, in float64;
//  - check_low_precision: an op in float16/bfloat16 against the same op in float32 on the same
//    (rounded) inputs, forward and backward, within the DESIGN §4 tolerance table;
//  - all_close: elementwise comparison with rtol/atol that reports the worst element.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Tolerance {
  double rtol;
  double atol;
};
// DESIGN §4: float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5), float64 (1e-7,
// 1e-7).
Tolerance tolerance_for(DType dtype);

// |actual - expected| <= atol + rtol * |expected| everywhere (NaN matches NaN, inf matches inf of
// the same sign); shapes must match. Dtypes may differ (values compared in float64).
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol);

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-7;
};

// `inputs` are float64 tensors (each is made a leaf requiring grad). Checks d sum(f(x) * w) / dx
// for every input against central differences, with a fixed random weighting w of the output.
::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                     GradcheckOptions options = {});

// Runs f on `inputs` (float32) cast to `dtype`, and on the same rounded values in float32; compares
// outputs and input gradients (for a fixed random output weighting) within tolerance_for(dtype),
// scaled by `tolerance_scale` for ops whose backward rounds more than once.
::testing::AssertionResult check_low_precision(const OpFn& f, const std::vector<Tensor>& inputs,
                                               DType dtype, double tolerance_scale = 1.0);

}  // namespace mixprec::testing
