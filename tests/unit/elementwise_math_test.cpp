// The per-element bodies shared by the CPU loops and the CUDA kernels
// (src/backend/kernel_math/elementwise_math.h), run on the host: each activation against an
// independent long-double formula, each derivative against a central difference of the value,
// the 16-bit backward's recomputation, and the binary ops' NaN and tie rules.
#include "backend/kernel_math/elementwise_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace mixprec::kernel_math {
namespace {

long double reference(UnaryOp op, long double x) {
  const long double sigmoid = 1.0L / (1.0L + std::exp(-x));
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return 1.0L / std::sqrt(x);
    case UnaryOp::abs: return std::fabs(x);
    case UnaryOp::relu: return x > 0 ? x : 0.0L;
    case UnaryOp::relu6: return std::fmin(std::fmax(x, 0.0L), 6.0L);
    case UnaryOp::sigmoid: return sigmoid;
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::gelu: return 0.5L * x * (1.0L + std::erf(x / std::sqrt(2.0L)));
    case UnaryOp::gelu_tanh: {
      const long double c = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
      return 0.5L * x * (1.0L + std::tanh(c * (x + 0.044715L * x * x * x)));
    }
    case UnaryOp::silu: return x * sigmoid;
  }
  return 0;
}

const std::vector<UnaryOp> kOps = {
#define MIXPREC_OP(name, text) UnaryOp::name,
    MIXPREC_FOR_EACH_UNARY_OP(MIXPREC_OP)
#undef MIXPREC_OP
};

// Inputs inside every op's domain (log, sqrt need x > 0) and away from relu's kinks.
const std::vector<double> kPositive = {0.03, 0.4, 1.3, 2.7, 5.2, 7.5, 11.0};
const std::vector<double> kAny = {-7.5, -3.1, -0.8, -0.05, 0.05, 0.8, 3.1, 5.4, 7.5};

bool needs_positive(UnaryOp op) {
  return op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
}

TEST(ElementwiseMath, EveryActivationMatchesALongDoubleReference) {
  for (UnaryOp op : kOps) {
    for (double x : needs_positive(op) ? kPositive : kAny) {
      const long double want = reference(op, x);
      const double got_d = unary_value<double>(op, x);
      const float got_f = unary_value<float>(op, static_cast<float>(x));
      const long double ref_f = reference(op, static_cast<float>(x));
      EXPECT_NEAR(got_d, static_cast<double>(want), 4e-15 * (1 + std::fabs(double(want))))
          << op_name(op) << " at " << x;
      EXPECT_NEAR(got_f, static_cast<double>(ref_f), 4e-7 * (1 + std::fabs(double(ref_f))))
          << op_name(op) << " at " << x;
    }
  }
}

TEST(ElementwiseMath, EveryDerivativeMatchesACentralDifference) {
  for (UnaryOp op : kOps) {
    for (double x : needs_positive(op) ? kPositive : kAny) {
      const double h = 1e-6 * (1 + std::fabs(x));
      const double numeric =
          (unary_value<double>(op, x + h) - unary_value<double>(op, x - h)) / (2 * h);
      const double y = unary_value<double>(op, x);
      EXPECT_NEAR(unary_derivative<double>(op, x, y), numeric, 1e-6 * (1 + std::fabs(numeric)))
          << op_name(op) << " at " << x;
      // The backward body is g times the derivative.
      EXPECT_DOUBLE_EQ(unary_backward_value<double>(op, 3.0, x, y, RecomputeForward::no),
                       3.0 * unary_derivative<double>(op, x, y));
    }
  }
}

// A rounded 16-bit y would spoil y (1 - y) near saturation: the recomputing backward ignores the
// y it is given and uses the forward value of x.
TEST(ElementwiseMath, RecomputingBackwardUsesTheForwardOfX) {
  const float x = 6.0f;
  const float rounded_y = 1.0f;  // sigmoid(6) = 0.99753 rounds to 1 in bfloat16
  EXPECT_EQ(unary_backward_value(UnaryOp::sigmoid, 1.0f, x, rounded_y, RecomputeForward::no), 0.0f);
  EXPECT_NEAR(unary_backward_value(UnaryOp::sigmoid, 1.0f, x, rounded_y, RecomputeForward::yes),
              0.0024665f, 1e-6f);
}

TEST(ElementwiseMath, NanStaysNanAndSaturationIsFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(unary_value(UnaryOp::relu, nan)));
  EXPECT_TRUE(std::isnan(unary_value(UnaryOp::relu6, nan)));
  EXPECT_EQ(unary_value(UnaryOp::relu6, 9.0f), 6.0f);
  EXPECT_TRUE(std::signbit(unary_value(UnaryOp::relu6, -0.0f)));  // as the CPU always did
  EXPECT_EQ(unary_value(UnaryOp::sigmoid, -200.0f), 0.0f);  // no exp overflow: e^x / (1 + e^x)
  EXPECT_EQ(unary_value(UnaryOp::sigmoid, 200.0f), 1.0f);
  EXPECT_EQ(unary_value(UnaryOp::silu, -200.0f), -0.0f);
}

TEST(ElementwiseMath, BinaryOpsPropagateNanAndPickTheFirstOnTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(binary_value(BinaryOp::add, 1.5f, 2.0f), 3.5f);
  EXPECT_EQ(binary_value(BinaryOp::sub, 1.5f, 2.0f), -0.5f);
  EXPECT_EQ(binary_value(BinaryOp::mul, 1.5f, 2.0f), 3.0f);
  EXPECT_EQ(binary_value(BinaryOp::div, 1.5f, 2.0f), 0.75f);
  EXPECT_EQ(binary_value(BinaryOp::pow, 1.5f, 2.0f), 2.25f);
  EXPECT_EQ(binary_value(BinaryOp::maximum, 1.5f, 2.0f), 2.0f);
  EXPECT_EQ(binary_value(BinaryOp::minimum, 1.5f, 2.0f), 1.5f);
  EXPECT_TRUE(std::isnan(binary_value(BinaryOp::maximum, nan, 2.0f)));
  EXPECT_TRUE(std::isnan(binary_value(BinaryOp::maximum, 2.0f, nan)));
  EXPECT_TRUE(std::isnan(binary_value(BinaryOp::minimum, 2.0f, nan)));
  EXPECT_TRUE(std::signbit(binary_value(BinaryOp::maximum, -0.0f, 0.0f)));  // ties: a
  EXPECT_FALSE(std::signbit(binary_value(BinaryOp::minimum, 0.0f, -0.0f)));
}

}  // namespace
}  // namespace mixprec::kernel_math
