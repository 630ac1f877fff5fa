// Accuracy of the vectorised tanh, gelu and gelu(tanh) forward and backward on the CPU (float32
// and 16-bit storage) against float64 references over a dense grid: [-20, 20] in steps of 1e-4,
// magnitudes from the smallest subnormal to the largest float in steps of 1%, +-0, +-inf, NaN.
// The asserted bound: |y - ref| <= N (ulp(ref) + 2^-24 S(x)), where S is the sensitivity of the
// function to one rounding of its input (|x f'(x)|) and, for the derivatives, also the size of the
// terms that cancel where the derivative crosses zero (Phi and x phi for gelu). tanh's forward
// and its recomputed derivative have S = 0: a pure ulp bound. 16-bit results add half an ulp of
// the 16-bit format (one rounding of the float32 result). NaN where the reference is NaN (NaN
// propagates; 0 * inf at +-inf as the double formulas give), infinities exact.
// N: tanh 2 (its recomputed 16-bit derivative 5), gelu 10 (derivative 16), gelu(tanh) 8 (12);
// measured on AVX-512 at 1.4, 7.4 (9.4) and 5.7 (8.3).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kScale = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;

double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double density(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * kPi); }
double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double two_u(double x) { return 2 * kScale * (x + kCubic * x * x * x); }

struct AccuracyCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> value, derivative;
  std::function<double(double)> value_scale, derivative_scale;  // S(x) of the header
  double value_bound, derivative_bound;                         // N of the header
};

// |x f'(x)| for f given in double (a central difference: only a scale, not a reference).
std::function<double(double)> sensitivity(std::function<double(double)> f) {
  return [f](double x) {
    const double h = std::max(1e-7, std::fabs(x) * 1e-7);
    return std::fabs(x * (f(x + h) - f(x - h)) / (2 * h));
  };
}

std::vector<AccuracyCase> cases() {
  const auto zero = [](double) { return 0.0; };
  const auto gelu_d = [](double x) { return phi(x) + x * density(x); };
  const auto gelu_tanh_d = [](double x) {
    const double s = sig(two_u(x));
    return s + 2 * x * s * (1 - s) * kScale * (1 + 3 * kCubic * x * x);
  };
  const auto gelu_d_sens = sensitivity(gelu_d);
  const auto gelu_tanh_d_sens = sensitivity(gelu_tanh_d);
  return {
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
       [](double x) {
         const double e = std::exp(-2 * std::fabs(x));
         return 4 * e / ((1 + e) * (1 + e));
       },
       zero, zero, 2.0, 5.0},
      {"gelu", [](const Tensor& x) { return gelu(x); }, [](double x) { return x * phi(x); }, gelu_d,
       sensitivity([](double x) { return x * phi(x); }),
       [=](double x) { return gelu_d_sens(x) + phi(x) + std::fabs(x * density(x)); }, 10.0, 16.0},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::tanh); },
       [](double x) { return x * sig(two_u(x)); }, gelu_tanh_d,
       sensitivity([](double x) { return x * sig(two_u(x)); }),
       [=](double x) { return gelu_tanh_d_sens(x) + 2.0; }, 8.0, 12.0},
  };
}

std::vector<float> grid() {
  std::vector<float> v;
  for (int i = -200000; i <= 200000; ++i) v.push_back(static_cast<float>(i * 1e-4));
  for (double m = std::numeric_limits<float>::denorm_min(); m < 3.4e38; m *= 1.01) {
    v.push_back(static_cast<float>(m));
    v.push_back(-static_cast<float>(m));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()}) {
    v.push_back(s);
  }
  return v;
}

// The spacing of float32 (or of the 16-bit format, 11 or 8 significant bits) at |r|.
double ulp_at(double r, int digits, int min_exponent) {
  const double a = std::fabs(r);
  const double tiny = std::ldexp(1.0, min_exponent - 1);  // the smallest normal
  if (a < tiny) return std::ldexp(1.0, min_exponent - digits);
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - digits);
}

double ulp_of(DType dtype, double r) {
  if (dtype == kFloat16) return ulp_at(r, 11, -13);
  if (dtype == kBFloat16) return ulp_at(r, 8, -125);
  return ulp_at(r, 24, -125);
}

// Checks every result against its reference; returns the largest error in units of
// ulp32(ref) + 2^-24 S(x) (after taking off half a 16-bit ulp for 16-bit dtypes).
double worst_error(const std::vector<double>& xs, const std::vector<double>& ys, DType dtype,
                   const std::function<double(double)>& reference,
                   const std::function<double(double)>& scale, const std::string& what) {
  double worst = 0.0;
  int failures = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], y = ys[i], r = reference(x);
    if (std::isnan(r) || std::isinf(r)) {
      const bool ok = std::isnan(r) ? std::isnan(y) : y == r;
      if (!ok && failures++ < 5) ADD_FAILURE() << what << "(" << x << ") = " << y << ", want " << r;
      continue;
    }
    double s = scale(x);
    if (!std::isfinite(s)) s = 0.0;
    double err = std::fabs(y - r);
    if (dtype != kFloat32) err = std::max(0.0, err - 0.5 * ulp_of(dtype, r));
    const double units = std::isnan(err) ? 1e30 : err / (ulp_of(kFloat32, r) + 0x1p-24 * s);
    if (units > worst) worst = units;
  }
  return worst;
}

class UnaryAccuracyTest : public ::testing::TestWithParam<AccuracyCase> {};

TEST_P(UnaryAccuracyTest, ForwardAndBackwardWithinTheStatedBound) {
  const AccuracyCase& c = GetParam();
  const std::vector<float> values = grid();
  const auto n = static_cast<std::int64_t>(values.size());
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = from_vector(values, {n}).to(dtype).detach();
    x.set_requires_grad(true);
    const std::vector<double> xs = x.to_vector<double>();  // what the op sees
    const Tensor y = c.op(x);
    const std::vector<double> ys = y.to_vector<double>();
    const double forward = worst_error(xs, ys, dtype, c.value, c.value_scale, c.name);
    EXPECT_LE(forward, c.value_bound) << c.name << " forward";
    // g = 1: the backward returns the derivative itself. tanh's float32 derivative comes from
    // the rounded output, (1 - y)(1 + y): its error is that of y (2 ulp <= 2^-23) times 2|y|,
    // so the bound there is 2 (ulp(ref) + 2^-24).
    const Tensor dx = grad(y, {x}, ones({n}, {.dtype = dtype}))[0];
    const bool from_output = c.name == "tanh" && dtype == kFloat32;
    const auto scale = from_output ? std::function<double(double)>([](double) { return 1.0; })
                                   : c.derivative_scale;
    const double backward =
        worst_error(xs, dx.to_vector<double>(), dtype, c.derivative, scale, c.name + "'");
    EXPECT_LE(backward, from_output ? 2.0 : c.derivative_bound) << c.name << " backward";
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, UnaryAccuracyTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// log: within 1 ulp in float32 (one rounding of the 16-bit format more for 16-bit storage) over
// positive magnitudes from the smallest subnormal to the largest float; -inf at +-0, NaN below 0
// and for NaN, inf at inf. Its derivative 1/x is one division (checked by unary_test.cpp).
TEST(UnaryAccuracyLogTest, WithinOneUlpAndSpecialValues) {
  std::vector<float> values;
  for (float v : grid()) {
    if (v != 0.0f) values.push_back(std::fabs(v));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, -1.0f, -inf, inf, std::numeric_limits<float>::quiet_NaN()}) {
    values.push_back(s);
  }
  const auto n = static_cast<std::int64_t>(values.size());
  const auto reference = [](double x) { return std::log(x); };
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = from_vector(values, {n}).to(dtype);
    const std::vector<double> xs = x.to_vector<double>();
    const double worst = worst_error(
        xs, log(x).to_vector<double>(), dtype, reference, [](double) { return 0.0; }, "log");
    EXPECT_LE(worst, 1.0);
  }
}

// NaN in, NaN out (forward and backward), and the signed zeros and infinities the double
// formulas give, checked one by one (the grid test above checks them only in bulk).
TEST(UnaryAccuracySpecialValuesTest, NaNPropagatesAndLimitsHold) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = from_vector(std::vector<float>{nan, inf, -inf, -0.0f}, {4}).to(dtype).detach();
    x.set_requires_grad(true);
    const auto t = tanh(x).to_vector<double>();
    EXPECT_TRUE(std::isnan(t[0]));
    EXPECT_EQ(t[1], 1.0);
    EXPECT_EQ(t[2], -1.0);
    EXPECT_TRUE(t[3] == 0.0 && std::signbit(t[3]));
    for (auto approximation : {GeluApproximation::none, GeluApproximation::tanh}) {
      const Tensor y = gelu(x, approximation);
      const auto v = y.to_vector<double>();
      EXPECT_TRUE(std::isnan(v[0]));
      EXPECT_EQ(v[1], static_cast<double>(inf));
      EXPECT_TRUE(std::isnan(v[2]));  // -inf * Phi(-inf) = -inf * 0
      EXPECT_EQ(v[3], 0.0);
      const auto d = grad(y, {x}, ones({4}, {.dtype = dtype}))[0].to_vector<double>();
      EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1]) && std::isnan(d[2]));
      EXPECT_EQ(d[3], 0.5);
    }
    const auto dt = grad(tanh(x), {x}, ones({4}, {.dtype = dtype}))[0].to_vector<double>();
    EXPECT_TRUE(std::isnan(dt[0]));
    EXPECT_EQ(dt[1], 0.0);
    EXPECT_EQ(dt[2], 0.0);
    EXPECT_EQ(dt[3], 1.0);
  }
}

}  // namespace
}  // namespace mixprec
