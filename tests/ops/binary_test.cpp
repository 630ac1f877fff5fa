// Broadcasting binary arithmetic: forward against a double reference with its own broadcasting
// index arithmetic, gradients (gradcheck and closed forms), low precision, scalar operands,
// operators, NaN handling and error messages.
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

using Fn = std::function<double(double, double)>;

// out[i] = f(a[ia], b[ib]) with NumPy broadcasting, by explicit multi-index arithmetic.
std::vector<double> broadcast_reference(const std::vector<double>& a, const Shape& as,
                                        const std::vector<double>& b, const Shape& bs,
                                        const Shape& out, const Fn& f) {
  std::vector<double> result;
  const int rank = out.rank();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
  auto flat = [&](const Shape& s) {
    std::int64_t off = 0;
    for (int i = 0; i < s.rank(); ++i) {
      const std::int64_t j = idx[static_cast<std::size_t>(i + rank - s.rank())];
      off = off * s[i] + (s[i] == 1 ? 0 : j);
    }
    return static_cast<std::size_t>(off);
  };
  for (std::int64_t n = 0; n < out.numel(); ++n) {
    result.push_back(f(a[flat(as)], b[flat(bs)]));
    for (int i = rank - 1; i >= 0; --i) {
      if (++idx[static_cast<std::size_t>(i)] < out[i]) break;
      idx[static_cast<std::size_t>(i)] = 0;
    }
  }
  return result;
}

struct BinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  Fn reference;
  double a_lo, a_hi, b_lo, b_hi;
};

const std::vector<BinaryCase>& cases() {
  static const std::vector<BinaryCase> all = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](double x, double y) { return x + y; }, -3, 3, -3, 3},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
       [](double x, double y) { return x - y; }, -3, 3, -3, 3},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
       [](double x, double y) { return x * y; }, -3, 3, -3, 3},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
       [](double x, double y) { return x / y; }, -3, 3, 0.5, 3},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double x, double y) { return std::pow(x, y); }, 0.3, 3, -2, 2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double x, double y) { return std::max(x, y); }, -3, 3, -3, 3},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double x, double y) { return std::min(x, y); }, -3, 3, -3, 3},
  };
  return all;
}

std::vector<double> uniform_values(std::int64_t n, double lo, double hi, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * gen.uniform());
  return v;
}

struct ShapePair {
  Shape a, b, out;
};

const ShapePair kShapes[] = {
    {{3, 1, 4}, {2, 1}, {3, 2, 4}},  // both operands broadcast
    {{2, 1}, {3, 1, 4}, {3, 2, 4}},
    {{5, 3}, {3}, {5, 3}},  // (N, C) + (C,): a bias
    {{5, 3}, {5, 1}, {5, 3}},
    {{4}, {}, {4}},  // a rank-0 operand
    {{}, {2, 2}, {2, 2}},
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
    {{1}, {1}, {1}},
    {{0, 3}, {3}, {0, 3}},
};

class BinaryOpTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryOpTest, ForwardBroadcastsLikeNumpy) {
  const BinaryCase& c = GetParam();
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const ShapePair& s : kShapes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + s.a.to_string() + " x " +
                   s.b.to_string());
      const Tensor a =
          from_vector(uniform_values(s.a.numel(), c.a_lo, c.a_hi, 1), s.a, {.dtype = dtype});
      const Tensor b =
          from_vector(uniform_values(s.b.numel(), c.b_lo, c.b_hi, 2), s.b, {.dtype = dtype});
      const Tensor out = c.op(a, b);
      EXPECT_EQ(out.shape(), s.out);
      EXPECT_EQ(out.dtype(), dtype);
      const auto expected = broadcast_reference(a.to_vector<double>(), s.a, b.to_vector<double>(),
                                                s.b, s.out, c.reference);
      const testing::Tolerance tol =
          dtype == kFloat64 ? testing::Tolerance{1e-14, 1e-14} : testing::Tolerance{3e-7, 1e-6};
      EXPECT_TRUE(all_close(out, from_vector(expected, s.out, {.dtype = kFloat64}), tol));
    }
  }
}

TEST_P(BinaryOpTest, ForwardOnStridedViewsAndLargeTensors) {
  const BinaryCase& c = GetParam();
  // a transposed (4, 3) view against a sliced (1, 3) row: non-unit strides on both sides.
  const auto av = uniform_values(12, c.a_lo, c.a_hi, 3);
  const auto bv = uniform_values(6, c.b_lo, c.b_hi, 4);
  const Tensor a = from_vector(av, {3, 4}, {.dtype = kFloat64}).transpose(0, 1);  // (4, 3)
  const Tensor b = from_vector(bv, {2, 3}, {.dtype = kFloat64}).slice(0, 1, 2);   // (1, 3)
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      expected.push_back(c.reference(av[static_cast<std::size_t>(j * 4 + i)],
                                     bv[static_cast<std::size_t>(3 + j)]));
    }
  }
  EXPECT_TRUE(
      all_close(c.op(a, b), from_vector(expected, {4, 3}, {.dtype = kFloat64}), {1e-14, 1e-14}));
  // Parallel path with many chunks: (300, 257) against a (257,) row.
  const Shape big{300, 257};
  const auto xv = uniform_values(big.numel(), c.a_lo, c.a_hi, 5);
  const auto yv = uniform_values(257, c.b_lo, c.b_hi, 6);
  const Tensor x = from_vector(xv, big, {.dtype = kFloat64});
  const Tensor y = from_vector(yv, {257}, {.dtype = kFloat64});
  const auto exp_big = broadcast_reference(xv, big, yv, Shape({257}), big, c.reference);
  EXPECT_TRUE(
      all_close(c.op(x, y), from_vector(exp_big, big, {.dtype = kFloat64}), {1e-14, 1e-14}));
  // ... and the row first.
  const auto exp_rev = broadcast_reference(yv, Shape({257}), xv, big, big, c.reference);
  if (c.name != "pow" && c.name != "div") {  // operand ranges differ for these two
    EXPECT_TRUE(
        all_close(c.op(y, x), from_vector(exp_rev, big, {.dtype = kFloat64}), {1e-14, 1e-14}));
  }
}

TEST_P(BinaryOpTest, GradcheckWithBroadcasting) {
  const BinaryCase& c = GetParam();
  const ShapePair pairs[] = {
      {{3, 1, 4}, {2, 1}, {}}, {{4, 3}, {3}, {}}, {{2, 3}, {}, {}}, {{2, 3}, {2, 3}, {}}};
  for (const ShapePair& s : pairs) {
    SCOPED_TRACE(s.a.to_string() + " x " + s.b.to_string());
    auto av = uniform_values(s.a.numel(), c.a_lo, c.a_hi, 7);
    auto bv = uniform_values(s.b.numel(), c.b_lo, c.b_hi, 8);
    if (c.name == "maximum" || c.name == "minimum") {
      // Keep operands apart so that no finite difference crosses a tie.
      for (double& v : av) v = std::floor(v) + 0.25;
      for (double& v : bv) v = std::floor(v) + 0.75;
    }
    const Tensor a = from_vector(av, s.a, {.dtype = kFloat64});
    const Tensor b = from_vector(bv, s.b, {.dtype = kFloat64});
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0], in[1]); }, {a, b}));
  }
}

TEST_P(BinaryOpTest, LowPrecisionMatchesFloat32) {
  const BinaryCase& c = GetParam();
  const Tensor a = from_vector(uniform_values(24, c.a_lo, c.a_hi, 9), {2, 3, 4});
  const Tensor b = from_vector(uniform_values(4, c.b_lo, c.b_hi, 10), {4});
  const Tensor bb = from_vector(uniform_values(24, c.b_lo, c.b_hi, 11), {2, 3, 4});
  for (DType dtype : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto f = [&](const std::vector<Tensor>& in) { return c.op(in[0], in[1]); };
    EXPECT_TRUE(check_low_precision(f, {a, bb}, dtype));
    // The broadcast operand's gradient sums 6 rounded terms: allow for that.
    EXPECT_TRUE(check_low_precision(f, {a, b}, dtype, 4.0));
  }
}

TEST_P(BinaryOpTest, ErrorsNameTheOpShapesAndDtypes) {
  const BinaryCase& c = GetParam();
  const Tensor a = zeros({2, 3});
  try {
    c.op(a, zeros({4}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(c.name), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4,)"), std::string::npos) << m;
  }
  try {
    c.op(a, zeros({2, 3}, {.dtype = kFloat16}));
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(c.name), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_NE(m.find("float16"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
  }
  const Tensor i = zeros({2}, {.dtype = kInt32});
  EXPECT_THROW(c.op(i, i), DTypeError);
  EXPECT_THROW(c.op(a, Tensor()), ValueError);
}

INSTANTIATE_TEST_SUITE_P(AllOps, BinaryOpTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

Tensor vec(const std::vector<double>& v, DType dtype = kFloat64) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = dtype});
}

TEST(BinaryTest, BroadcastGradientsAreSummedToOperandShapes) {
  // out (N, C) = x (N, C) + bias (C,): d sum(out * w) / dbias = sum over N of w.
  Tensor x = zeros({3, 2}, {.dtype = kFloat64, .requires_grad = true});
  Tensor bias = zeros({2}, {.dtype = kFloat64, .requires_grad = true});
  const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, {.dtype = kFloat64});
  const auto g = grad(sum((x + bias) * w), {x, bias});
  EXPECT_EQ(g[0].shape(), Shape({3, 2}));
  EXPECT_EQ(g[1].shape(), Shape({2}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{9, 12}));
  EXPECT_EQ(g[0].to_vector<double>(), w.to_vector<double>());
  // (3, 1, 4) * (2, 1): a = 1, b = 2 everywhere: da = sum over axis 1 of b = 4, db = 12 * a = 12.
  Tensor a = ones({3, 1, 4}, {.dtype = kFloat64, .requires_grad = true});
  Tensor b = full({2, 1}, 2.0, {.dtype = kFloat64, .requires_grad = true});
  const auto g2 = grad(sum(a * b), {a, b});
  EXPECT_EQ(g2[0].to_vector<double>(), std::vector<double>(12, 4.0));
  EXPECT_EQ(g2[1].to_vector<double>(), std::vector<double>(2, 12.0));
}

TEST(BinaryTest, ScalarOperandsAndOperators) {
  const Tensor x = vec({1, -2, 4});
  EXPECT_EQ((x + 1.5).to_vector<double>(), (std::vector<double>{2.5, -0.5, 5.5}));
  EXPECT_EQ((x - 1.0).to_vector<double>(), (std::vector<double>{0, -3, 3}));
  EXPECT_EQ((x * 2.0).to_vector<double>(), (std::vector<double>{2, -4, 8}));
  EXPECT_EQ((x / 4.0).to_vector<double>(), (std::vector<double>{0.25, -0.5, 1}));
  EXPECT_EQ((1.5 + x).to_vector<double>(), (std::vector<double>{2.5, -0.5, 5.5}));
  EXPECT_EQ((10.0 - x).to_vector<double>(), (std::vector<double>{9, 12, 6}));
  EXPECT_EQ((3.0 * x).to_vector<double>(), (std::vector<double>{3, -6, 12}));
  EXPECT_EQ((8.0 / x).to_vector<double>(), (std::vector<double>{8, -4, 2}));
  EXPECT_EQ((-x).to_vector<double>(), (std::vector<double>{-1, 2, -4}));
  EXPECT_EQ(add(x, 0.5).to_vector<double>(), (std::vector<double>{1.5, -1.5, 4.5}));
  EXPECT_EQ(mul(x, -1.0).to_vector<double>(), (std::vector<double>{-1, 2, -4}));
  EXPECT_EQ(pow(x, 2.0).to_vector<double>(), (std::vector<double>{1, 4, 16}));
  EXPECT_EQ(pow(x, 3.0).to_vector<double>(), (std::vector<double>{1, -8, 64}));
  EXPECT_EQ((x + x * x).to_vector<double>(), (std::vector<double>{2, 2, 20}));
  EXPECT_EQ((x - x / x).to_vector<double>(), (std::vector<double>{0, -3, 3}));
  // A scalar operand takes the tensor's dtype (rounded to it).
  const Tensor h = vec({1, 2}, kFloat16);
  const Tensor hs = h + 0.1;
  EXPECT_EQ(hs.dtype(), kFloat16);
  const double tenth16 = 1638.0 / 16384.0;  // 0.1 in float16: 1.6384 * 2^-4 -> 1638 * 2^-14
  // 1 + 0.0999755859375 rounds to float16 spacing 2^-10: 1.099609375.
  EXPECT_EQ(hs.to_vector<double>()[0], 1.0 + std::round(tenth16 * 1024) / 1024);
  EXPECT_EQ((2.0 * h).dtype(), kFloat16);
  EXPECT_THROW(zeros({2}, {.dtype = kInt64}) + 1.0, DTypeError);
}

TEST(BinaryTest, ScalarOperandGradients) {
  Tensor x = vec({1, -2, 4});
  x.set_requires_grad(true);
  // f = sum(3 / x + x * x / 2 - 1): df/dx = -3 / x^2 + x.
  const auto g = grad(sum(3.0 / x + x * x / 2.0 - 1.0), {x})[0];
  EXPECT_TRUE(all_close(g, vec({-2.0, -2.75, 4 - 3.0 / 16}), {1e-15, 1e-15}));
  // pow with a negative base and an integer exponent: d x^3 = 3 x^2.
  const auto gp = grad(sum(pow(x, 3.0)), {x})[0];
  EXPECT_TRUE(all_close(gp, vec({3, 12, 48}), {1e-15, 0}));
  // 10 - x: the gradient of the right operand of sub is negated.
  EXPECT_EQ(grad(sum(10.0 - x), {x})[0].to_vector<double>(), std::vector<double>(3, -1.0));
}

TEST(BinaryTest, PowGradients) {
  // d/da a^b = b a^(b-1); d/db a^b = a^b ln a.
  Tensor a = vec({0.5, 2.0, 3.0});
  Tensor b = vec({1.5, -1.0, 2.0});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const auto g = grad(sum(pow(a, b)), {a, b});
  std::vector<double> da, db;
  for (auto [x, y] : {std::pair{0.5, 1.5}, {2.0, -1.0}, {3.0, 2.0}}) {
    da.push_back(y * std::pow(x, y - 1));
    db.push_back(std::pow(x, y) * std::log(x));
  }
  EXPECT_TRUE(all_close(g[0], vec(da), {1e-14, 1e-15}));
  EXPECT_TRUE(all_close(g[1], vec(db), {1e-14, 1e-15}));
  // The exponent gradient is 0 (not NaN) where the base is 0 or negative.
  Tensor base = vec({0.0, -2.0});
  Tensor e = vec({2.0, 2.0});
  e.set_requires_grad(true);
  const auto ge = grad(sum(pow(base, e)), {e})[0].to_vector<double>();
  EXPECT_EQ(ge, (std::vector<double>{0.0, 0.0}));
}

TEST(BinaryTest, MaximumMinimumPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor a = vec({nan, 1.0, nan, -1.0}, dtype);
    const Tensor b = vec({1.0, nan, nan, 2.0}, dtype);
    for (const Tensor& r : {maximum(a, b), maximum(b, a), minimum(a, b), minimum(b, a)}) {
      const auto v = r.to_vector<double>();
      EXPECT_TRUE(std::isnan(v[0]));
      EXPECT_TRUE(std::isnan(v[1]));
      EXPECT_TRUE(std::isnan(v[2]));
      EXPECT_FALSE(std::isnan(v[3]));
    }
    EXPECT_EQ(maximum(a, b).to_vector<double>()[3], 2.0);
    EXPECT_EQ(minimum(a, b).to_vector<double>()[3], -1.0);
  }
}

TEST(BinaryTest, MaximumMinimumTiesSendTheGradientToA) {
  Tensor a = vec({1, 2, 3});
  Tensor b = vec({1, 5, 0});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const auto gmax = grad(sum(maximum(a, b)), {a, b});
  EXPECT_EQ(gmax[0].to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(gmax[1].to_vector<double>(), (std::vector<double>{0, 1, 0}));
  const auto gmin = grad(sum(minimum(a, b)), {a, b});
  EXPECT_EQ(gmin[0].to_vector<double>(), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(gmin[1].to_vector<double>(), (std::vector<double>{0, 0, 1}));
  // relu as maximum(x, 0): 0 at the tie x = 0 goes to x.
  const auto gx = grad(sum(maximum(a, zeros({3}, {.dtype = kFloat64}))), {a})[0];
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

TEST(BinaryTest, IEEESpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor one = vec({1.0, -1.0, 0.0}, dtype);
    const Tensor zero = vec({0.0, 0.0, 0.0}, dtype);
    const auto d = div(one, zero).to_vector<double>();
    EXPECT_EQ(d[0], inf);
    EXPECT_EQ(d[1], -inf);
    EXPECT_TRUE(std::isnan(d[2]));
    const auto s = (vec({inf}, dtype) - vec({inf}, dtype)).to_vector<double>();
    EXPECT_TRUE(std::isnan(s[0]));
  }
  // float16 overflows at 65520: 300 * 300 = 90000 is inf there, finite in bfloat16.
  EXPECT_TRUE(std::isinf((vec({300}, kFloat16) * vec({300}, kFloat16)).item()));
  EXPECT_FALSE(std::isinf((vec({300}, kBFloat16) * vec({300}, kBFloat16)).item()));
}

TEST(BinaryTest, LowPrecisionComputesInFloatAndRoundsOnce) {
  // float16 has spacing 2 in [2048, 4096): 1024 + 1025 = 2049 and 2048 + 1 = 2049 are ties
  // between 2048 and 2050 and round to the even mantissa, 2048.
  const Tensor a = vec({1024, 2048, 3}, kFloat16);
  const Tensor b = vec({1025, 1, 0.1}, kFloat16);
  const auto s = add(a, b).to_vector<double>();
  EXPECT_EQ(s[0], 2048.0);
  EXPECT_EQ(s[1], 2048.0);
  // 3 * 0.0999755859375 = 0.2999267578125 = 1228.5 * 2^-12: a tie in float16 (spacing 2^-12
  // in [0.25, 0.5)) that rounds to the even 1228 * 2^-12.
  EXPECT_EQ(mul(a, b).to_vector<double>()[2], 1228.0 / 4096.0);
}

}  // namespace
}  // namespace mixprec
