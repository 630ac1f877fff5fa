// Elementwise unary ops: forward against std:: math in double, float64 gradcheck away from kinks,
// float16/bfloat16 against float32, special values and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::check_low_precision;
using testing::gradcheck;
using testing::tolerance_for;

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;   // the function, in double
  std::function<double(double)> derivative;  // its derivative, in double
  double lo, hi;                             // input range for the tests
  std::vector<double> avoid;                 // kinks: inputs closer than 0.05 are moved away
};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)

double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

const std::vector<UnaryCase>& cases() {
  static const std::vector<UnaryCase> all = {
      {"neg",
       [](const Tensor& x) { return neg(x); },
       [](double x) { return -x; },
       [](double) { return -1.0; },
       -5,
       5,
       {}},
      {"exp",
       [](const Tensor& x) { return exp(x); },
       [](double x) { return std::exp(x); },
       [](double x) { return std::exp(x); },
       -4,
       4,
       {}},
      {"log",
       [](const Tensor& x) { return log(x); },
       [](double x) { return std::log(x); },
       [](double x) { return 1 / x; },
       0.1,
       10,
       {}},
      {"sqrt",
       [](const Tensor& x) { return sqrt(x); },
       [](double x) { return std::sqrt(x); },
       [](double x) { return 0.5 / std::sqrt(x); },
       0.1,
       10,
       {}},
      {"rsqrt",
       [](const Tensor& x) { return rsqrt(x); },
       [](double x) { return 1 / std::sqrt(x); },
       [](double x) { return -0.5 * std::pow(x, -1.5); },
       0.2,
       10,
       {}},
      {"abs",
       [](const Tensor& x) { return abs(x); },
       [](double x) { return std::fabs(x); },
       [](double x) { return x > 0 ? 1.0 : -1.0; },
       -3,
       3,
       {0.0}},
      {"relu",
       [](const Tensor& x) { return relu(x); },
       [](double x) { return x > 0 ? x : 0.0; },
       [](double x) { return x > 0 ? 1.0 : 0.0; },
       -3,
       3,
       {0.0}},
      {"relu6",
       [](const Tensor& x) { return relu6(x); },
       [](double x) { return std::min(std::max(x, 0.0), 6.0); },
       [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; },
       -2,
       8,
       {0.0, 6.0}},
      {"sigmoid",
       [](const Tensor& x) { return sigmoid(x); },
       sigmoid_ref,
       [](double x) { return sigmoid_ref(x) * (1 - sigmoid_ref(x)); },
       -8,
       8,
       {}},
      {"tanh",
       [](const Tensor& x) { return tanh(x); },
       [](double x) { return std::tanh(x); },
       [](double x) { return 1 - std::tanh(x) * std::tanh(x); },
       -4,
       4,
       {}},
      {"gelu",
       [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       [](double x) {
         return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
                x * std::exp(-0.5 * x * x) / std::sqrt(2 * 3.14159265358979323846);
       },
       -5,
       5,
       {}},
      {"gelu_tanh",
       [](const Tensor& x) { return gelu(x, GeluApproximation::tanh); },
       gelu_tanh_ref,
       [](double x) {  // central difference of the double reference, h = 1e-5: error ~1e-10
         return (gelu_tanh_ref(x + 1e-5) - gelu_tanh_ref(x - 1e-5)) / 2e-5;
       },
       -5,
       5,
       {}},
      {"silu",
       [](const Tensor& x) { return silu(x); },
       [](double x) { return x * sigmoid_ref(x); },
       [](double x) { return sigmoid_ref(x) * (1 + x * (1 - sigmoid_ref(x))); },
       -8,
       8,
       {}},
      {"swish",
       [](const Tensor& x) { return swish(x); },
       [](double x) { return x / (1 + std::exp(-x)); },
       [](double x) { return sigmoid_ref(x) * (1 + x * (1 - sigmoid_ref(x))); },
       -8,
       8,
       {}},
  };
  return all;
}

// n values spread over [lo, hi] (deterministic, not sorted), nudged away from kinks.
std::vector<double> inputs_for(const UnaryCase& c, int n, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    double x = c.lo + (c.hi - c.lo) * gen.uniform();
    for (double k : c.avoid) {
      if (std::abs(x - k) < 0.05) x = k + (x < k ? -0.05 : 0.05);
    }
    v.push_back(x);
  }
  return v;
}

class UnaryOpTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryOpTest, ForwardMatchesDoubleReference) {
  const UnaryCase& c = GetParam();
  for (DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto values = inputs_for(c, 200, 1);
    const Tensor x = from_vector(values, {10, 20}, {.dtype = dtype});
    const auto stored = x.to_vector<double>();  // the values the op really sees
    std::vector<double> expected;
    for (double v : stored) expected.push_back(c.reference(v));
    const Tensor y = c.op(x);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.shape(), x.shape());
    // float32 computes in float: allow a few ulps on top of the float32 table entry.
    const testing::Tolerance tol =
        dtype == kFloat64 ? testing::Tolerance{1e-12, 1e-14} : testing::Tolerance{4e-7, 1e-6};
    EXPECT_TRUE(all_close(y, from_vector(expected, {10, 20}, {.dtype = kFloat64}), tol));
  }
}

TEST_P(UnaryOpTest, ForwardOnStridedAndLargeInputs) {
  const UnaryCase& c = GetParam();
  // (7, 3) transposed: the kernel must follow the strides.
  const auto values = inputs_for(c, 21, 2);
  const Tensor x = from_vector(values, {7, 3}, {.dtype = kFloat64}).transpose(0, 1);
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 7; ++j)
      expected.push_back(c.reference(values[static_cast<std::size_t>(j * 3 + i)]));
  }
  EXPECT_TRUE(
      all_close(c.op(x), from_vector(expected, {3, 7}, {.dtype = kFloat64}), {1e-12, 1e-14}));
  // Large enough for the parallel path and several chunks, with a ragged tail.
  const auto big = inputs_for(c, 70001, 3);
  const Tensor xb = from_vector(big, {70001}, {.dtype = kFloat64});
  std::vector<double> expected_big;
  for (double v : big) expected_big.push_back(c.reference(v));
  EXPECT_TRUE(
      all_close(c.op(xb), from_vector(expected_big, {70001}, {.dtype = kFloat64}), {1e-12, 1e-14}));
}

TEST_P(UnaryOpTest, BackwardMatchesAnalyticDerivative) {
  const UnaryCase& c = GetParam();
  const auto values = inputs_for(c, 24, 4);
  Tensor x = from_vector(values, {4, 6}, {.dtype = kFloat64, .requires_grad = true});
  const Tensor g = random_uniform({4, 6}, -1.0, 1.0, {.dtype = kFloat64});
  const auto gv = g.to_vector<double>();
  const auto dx = grad(c.op(x), {x}, g)[0];
  std::vector<double> expected;
  for (std::size_t i = 0; i < values.size(); ++i)
    expected.push_back(gv[i] * c.derivative(values[i]));
  EXPECT_TRUE(all_close(dx, from_vector(expected, {4, 6}, {.dtype = kFloat64}), {1e-8, 1e-10}));
}

// The float32 and 16-bit backward (vectorised per op on the CPU, the 16-bit one recomputing the
// forward from x) against g * f'(x) in double, over several chunks with a ragged tail.
TEST_P(UnaryOpTest, Float32And16BitBackwardMatchDoubleDerivative) {
  const UnaryCase& c = GetParam();
  constexpr std::int64_t n = 2 * 1024 + 37;
  const auto values = inputs_for(c, static_cast<int>(n), 11);
  Generator gen(12);
  const Tensor g64 = random_uniform({n}, -1.0, 1.0, {.dtype = kFloat64}, gen);
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = from_vector(values, {n}, {.dtype = dtype, .requires_grad = true});
    const Tensor g = g64.to(dtype);
    const auto xs = x.to_vector<double>(), gs = g.to_vector<double>();
    std::vector<double> expected;
    for (std::size_t i = 0; i < xs.size(); ++i) expected.push_back(gs[i] * c.derivative(xs[i]));
    const Tensor dx = grad(c.op(x), {x}, g)[0];
    ASSERT_EQ(dx.dtype(), dtype);
    // Computed in float from the stored x and g, rounded once: one rounding of the dtype.
    const testing::Tolerance tol = dtype == kFloat32   ? testing::Tolerance{2e-6, 1e-6}
                                   : dtype == kFloat16 ? testing::Tolerance{2e-3, 1e-4}
                                                       : testing::Tolerance{1.6e-2, 1e-3};
    EXPECT_TRUE(all_close(dx, from_vector(expected, {n}, {.dtype = kFloat64}), tol));
  }
}

TEST_P(UnaryOpTest, Gradcheck) {
  const UnaryCase& c = GetParam();
  const Tensor x = from_vector(inputs_for(c, 12, 5), {3, 4}, {.dtype = kFloat64});
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0]); }, {x}));
}

TEST_P(UnaryOpTest, LowPrecisionMatchesFloat32) {
  const UnaryCase& c = GetParam();
  const Tensor x = from_vector(inputs_for(c, 64, 6), {8, 8});
  for (DType dtype : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    EXPECT_TRUE(check_low_precision([&](const std::vector<Tensor>& in) { return c.op(in[0]); }, {x},
                                    dtype));
  }
}

TEST_P(UnaryOpTest, RejectsIntegerInputNamingTheOp) {
  const UnaryCase& c = GetParam();
  const Tensor i = from_vector(std::vector<std::int32_t>{1, 2}, {2});
  EXPECT_THROW(c.op(i), DTypeError);
  try {
    c.op(i);
  } catch (const DTypeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("int32"), std::string::npos) << message;
    const std::string stem = c.name == "swish" ? "silu" : c.name.substr(0, 4);
    EXPECT_NE(message.find(stem), std::string::npos) << message;
  }
  EXPECT_THROW(c.op(Tensor()), ValueError);
}

INSTANTIATE_TEST_SUITE_P(AllOps, UnaryOpTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

double at(const Tensor& t, std::size_t i) { return t.to_vector<double>()[i]; }

TEST(UnarySpecialValuesTest, ReluKeepsNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = from_vector(std::vector<double>{nan, -1.0, 2.0}, {3}, {.dtype = dtype});
    const Tensor r = relu(x);
    EXPECT_TRUE(std::isnan(at(r, 0)));
    EXPECT_EQ(at(r, 1), 0.0);
    EXPECT_EQ(at(r, 2), 2.0);
    EXPECT_TRUE(std::isnan(at(relu6(x), 0)));
    EXPECT_TRUE(std::isnan(at(sigmoid(x), 0)));
    EXPECT_TRUE(std::isnan(at(exp(x), 0)));
    EXPECT_TRUE(std::isnan(at(gelu(x), 0)));
  }
}

TEST(UnarySpecialValuesTest, SigmoidSaturatesWithoutOverflow) {
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = from_vector(std::vector<double>{-100.0, 100.0, -1000.0, 1000.0}, {4},
                           {.dtype = dtype, .requires_grad = true});
    EXPECT_EQ(at(x, 3), 1000.0);  // exactly representable in every floating dtype here
    const Tensor y = sigmoid(x);
    const auto v = y.to_vector<double>();
    for (double e : v) EXPECT_TRUE(std::isfinite(e));
    EXPECT_NEAR(v[0], 0.0, 1e-30);
    EXPECT_EQ(v[1], 1.0);
    EXPECT_NEAR(v[2], 0.0, 1e-30);
    EXPECT_EQ(v[3], 1.0);
    const Tensor g = grad(sum(y), {x})[0];
    for (double e : g.to_vector<double>()) {
      EXPECT_TRUE(std::isfinite(e));
      EXPECT_NEAR(e, 0.0, 1e-30);
    }
    // silu saturates to x and 0.
    const auto s = silu(x).to_vector<double>();
    EXPECT_EQ(s[1], 100.0);
    EXPECT_EQ(s[3], 1000.0);
    EXPECT_NEAR(s[0], 0.0, 1e-30);
    // tanh saturates to +-1.
    const auto t = tanh(x).to_vector<double>();
    EXPECT_EQ(t[0], -1.0);
    EXPECT_EQ(t[1], 1.0);
  }
}

TEST(UnarySpecialValuesTest, DomainEdges) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = from_vector(std::vector<double>{0.0, -1.0, inf}, {3}, {.dtype = dtype});
    const auto l = log(x).to_vector<double>();
    EXPECT_EQ(l[0], -inf);
    EXPECT_TRUE(std::isnan(l[1]));
    EXPECT_EQ(l[2], inf);
    const auto s = sqrt(x).to_vector<double>();
    EXPECT_EQ(s[0], 0.0);
    EXPECT_TRUE(std::isnan(s[1]));
    EXPECT_EQ(rsqrt(x).to_vector<double>()[0], inf);
    EXPECT_EQ(exp(x).to_vector<double>()[2], inf);
    EXPECT_EQ(relu(x).to_vector<double>()[2], inf);
    EXPECT_EQ(relu6(x).to_vector<double>()[2], 6.0);
    EXPECT_EQ(abs(x).to_vector<double>()[1], 1.0);
  }
  // exp overflows float16 (max 65504) at e^11.1 but not bfloat16 or float32.
  const Tensor twelve = full({1}, 12.0, {.dtype = kFloat16});
  EXPECT_TRUE(std::isinf(exp(twelve).item()));
  EXPECT_FALSE(std::isinf(exp(twelve.to(kBFloat16)).item()));
}

TEST(UnarySpecialValuesTest, KinksHaveTheDocumentedSubgradient) {
  Tensor x = from_vector(std::vector<double>{0.0, 0.0, 6.0}, {3},
                         {.dtype = kFloat64, .requires_grad = true});
  EXPECT_EQ(grad(sum(abs(x)), {x})[0].to_vector<double>()[0], 0.0);  // gradient 0 at 0
  EXPECT_EQ(grad(sum(relu(x)), {x})[0].to_vector<double>()[0], 0.0);
  const auto r6 = grad(sum(relu6(x)), {x})[0].to_vector<double>();
  EXPECT_EQ(r6[0], 0.0);
  EXPECT_EQ(r6[2], 0.0);
}

// relu and relu6 keep only their output for the backward: the mask taken from y must be the one
// from x at the kinks, just past them, for NaN and infinities, in every dtype.
TEST(UnarySpecialValuesTest, ReluMasksFromTheOutputMatchTheInput) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {-inf, -1.0, -0.0, 0.0, 1e-30, 0.5, 5.96875, 6.0, 6.0625, 7.0, inf};
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = from_vector(v, {static_cast<std::int64_t>(v.size())},
                           {.dtype = dtype, .requires_grad = true});
    const auto xs = x.to_vector<double>();
    const auto dr = grad(sum(relu(x)), {x})[0].to_vector<double>();
    const auto dr6 = grad(sum(relu6(x)), {x})[0].to_vector<double>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      EXPECT_EQ(dr[i], xs[i] > 0 ? 1.0 : 0.0) << "relu at " << xs[i];
      EXPECT_EQ(dr6[i], xs[i] > 0 && xs[i] < 6 ? 1.0 : 0.0) << "relu6 at " << xs[i];
    }
    // A NaN input: the gradient is g * 0 for a finite g, as before.
    Tensor xn =
        from_vector(std::vector<double>{nan, 1.0}, {2}, {.dtype = dtype, .requires_grad = true});
    const auto dn = grad(sum(relu6(xn)), {xn})[0].to_vector<double>();
    EXPECT_EQ(dn[0], 0.0);
    EXPECT_EQ(dn[1], 1.0);
  }
}

// relu and relu6 on 16-bit storage (integer selects on the bit patterns) against the float32 op
// on the same values, bit for bit, forward and backward, over every finite 16-bit value and the
// special ones (signed zeros, infinities, NaN), with finite, infinite and NaN gradients.
TEST(UnarySpecialValuesTest, Relu16BitIsExactlyTheFloat32Result) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {-0.0, 0.0, inf, -inf, nan, 6.0, -6.0, 5.96875, 6.03125};
  Generator gen(21);
  for (int i = 0; i < 40000; ++i) v.push_back(20.0 * gen.uniform() - 10.0);
  const auto n = static_cast<std::int64_t>(v.size());
  std::vector<double> gv(v.size());
  for (std::size_t i = 0; i < gv.size(); ++i) gv[i] = 2.0 * gen.uniform() - 1.0;
  gv[0] = -0.5, gv[1] = inf, gv[2] = nan, gv[3] = -inf;
  for (DType dtype : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    for (bool six : {false, true}) {
      const auto op = [six](const Tensor& t) { return six ? relu6(t) : relu(t); };
      Tensor x = from_vector(v, {n}, {.dtype = dtype, .requires_grad = true});
      Tensor x32 = x.detach().to(kFloat32).detach();
      x32 = from_vector(x32.to_vector<double>(), {n}, {.requires_grad = true});
      const Tensor g = from_vector(gv, {n}, {.dtype = dtype});
      const Tensor y = op(x), y32 = op(x32);
      const auto dx = grad(y, {x}, g)[0].to_vector<double>();
      const auto dx32 = grad(y32, {x32}, g.to(kFloat32))[0].to(dtype).to_vector<double>();
      const auto a = y.to_vector<double>(), b = y32.to(dtype).to_vector<double>();
      for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(std::isnan(a[i]) ? std::isnan(b[i])
                                     : a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]))
            << "forward at " << v[i] << ": " << a[i] << " vs " << b[i];
        ASSERT_TRUE(std::isnan(dx[i])
                        ? std::isnan(dx32[i])
                        : dx[i] == dx32[i] && std::signbit(dx[i]) == std::signbit(dx32[i]))
            << "backward at " << v[i] << " g " << gv[i] << ": " << dx[i] << " vs " << dx32[i];
      }
    }
  }
}

TEST(UnarySpecialValuesTest, GeluApproximationsDiffer) {
  // The two forms agree to ~1e-3 but are not the same function.
  const Tensor x = from_vector(std::vector<double>{-3, -1, 0.5, 2}, {4}, {.dtype = kFloat64});
  const auto exact = gelu(x).to_vector<double>();
  const auto approx = gelu(x, GeluApproximation::tanh).to_vector<double>();
  double max_diff = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(exact[i] - approx[i]));
  }
  EXPECT_GT(max_diff, 1e-5);
  EXPECT_LT(max_diff, 5e-3);
  EXPECT_NEAR(gelu(scalar(1.0, {.dtype = kFloat64})).item(), 0.8413447460685429, 1e-15);
}

TEST(UnarySpecialValuesTest, UnaryOnEmptyAndScalarTensors) {
  EXPECT_EQ(exp(zeros({0, 3})).shape(), Shape({0, 3}));
  EXPECT_EQ(exp(scalar(0.0)).item(), 1.0);
  EXPECT_EQ(exp(zeros({2, 0, 4})).numel(), 0);
}

}  // namespace
}  // namespace mixprec
