// Comparisons, where and finiteness checks.
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
using testing::gradcheck;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor vec(const std::vector<double>& v, DType dtype = kFloat64) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = dtype});
}

std::vector<bool> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), kBool);
  return t.to_vector<bool>();
}

struct CompareCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<bool(double, double)> reference;
};

const std::vector<CompareCase>& compare_cases() {
  static const std::vector<CompareCase> all = {
      {"equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); },
       [](double x, double y) { return x == y; }},
      {"not_equal", [](const Tensor& a, const Tensor& b) { return not_equal(a, b); },
       [](double x, double y) { return x != y; }},
      {"less", [](const Tensor& a, const Tensor& b) { return less(a, b); },
       [](double x, double y) { return x < y; }},
      {"less_equal", [](const Tensor& a, const Tensor& b) { return less_equal(a, b); },
       [](double x, double y) { return x <= y; }},
      {"greater", [](const Tensor& a, const Tensor& b) { return greater(a, b); },
       [](double x, double y) { return x > y; }},
      {"greater_equal", [](const Tensor& a, const Tensor& b) { return greater_equal(a, b); },
       [](double x, double y) { return x >= y; }},
  };
  return all;
}

class CompareTest : public ::testing::TestWithParam<CompareCase> {};

TEST_P(CompareTest, EveryDtypeWithBroadcasting) {
  const CompareCase& c = GetParam();
  // a (3, 1) against b (4,): every pair of {-1, 0, 2} x {-1, 0, 1, 2}, including equal pairs.
  const std::vector<double> av{-1, 0, 2};
  const std::vector<double> bv{-1, 0, 1, 2};
  std::vector<bool> expected;
  for (double x : av) {
    for (double y : bv) expected.push_back(c.reference(x, y));
  }
  const DType dtypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64};
  for (DType dtype : dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor a = from_vector(av, {3, 1}, {.dtype = dtype});
    const Tensor b = from_vector(bv, {4}, {.dtype = dtype});
    const Tensor r = c.op(a, b);
    EXPECT_EQ(r.shape(), Shape({3, 4}));
    EXPECT_EQ(bools(r), expected);
    EXPECT_FALSE(r.requires_grad());
  }
  // uint8 and bool on their own ranges.
  const Tensor u = from_vector(std::vector<double>{0, 7, 255}, {3}, {.dtype = kUInt8});
  const Tensor u2 = from_vector(std::vector<double>{7, 7, 7}, {3}, {.dtype = kUInt8});
  EXPECT_EQ(bools(c.op(u, u2)),
            (std::vector<bool>{c.reference(0, 7), c.reference(7, 7), c.reference(255, 7)}));
  const Tensor t = from_vector(std::vector<double>{0, 1}, {2, 1}, {.dtype = kBool});
  const Tensor f = from_vector(std::vector<double>{0, 1}, {2}, {.dtype = kBool});
  EXPECT_EQ(bools(c.op(t, f)), (std::vector<bool>{c.reference(0, 0), c.reference(0, 1),
                                                  c.reference(1, 0), c.reference(1, 1)}));
}

TEST_P(CompareTest, IntegersCompareExactly) {
  const CompareCase& c = GetParam();
  // 2^24 + 1 and 2^24 are equal in float32; int32 must still tell them apart. Likewise for int64
  // around 2^40 (float32 spacing 2^17 there).
  const Tensor a = from_vector(std::vector<std::int32_t>{16777217, -16777217}, {2});
  const Tensor b = from_vector(std::vector<std::int32_t>{16777216, -16777216}, {2});
  EXPECT_EQ(bools(c.op(a, b)), (std::vector<bool>{c.reference(16777217.0, 16777216.0),
                                                  c.reference(-16777217.0, -16777216.0)}));
  const std::int64_t big = 1ll << 40;
  const Tensor la = from_vector(std::vector<std::int64_t>{big + 1}, {1});
  const Tensor lb = from_vector(std::vector<std::int64_t>{big}, {1});
  EXPECT_EQ(bools(c.op(la, lb))[0], c.reference(2.0, 1.0));
}

TEST_P(CompareTest, NaNComparesFalseExceptNotEqual) {
  const CompareCase& c = GetParam();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    const Tensor a = vec({kNaN, kNaN, 1.0, kInf}, dtype);
    const Tensor b = vec({kNaN, 1.0, kNaN, kInf}, dtype);
    std::vector<bool> expected{c.reference(kNaN, kNaN), c.reference(kNaN, 1.0),
                               c.reference(1.0, kNaN), c.reference(kInf, kInf)};
    EXPECT_EQ(bools(c.op(a, b)), expected) << dtype_name(dtype);
  }
}

TEST_P(CompareTest, Errors) {
  const CompareCase& c = GetParam();
  try {
    c.op(zeros({2}), zeros({2}, {.dtype = kInt32}));
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(c.name), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
  }
  try {
    c.op(zeros({2, 3}), zeros({2}));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(c.name), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, CompareTest, ::testing::ValuesIn(compare_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(WhereTest, ForwardBroadcastsAllThree) {
  // cond (2, 1), a (3,), b scalar -> (2, 3).
  const Tensor cond = from_vector(std::vector<double>{1, 0}, {2, 1}, {.dtype = kBool});
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor a = vec({1, 2, 3}, dtype);
    const Tensor b = scalar(-1, {.dtype = dtype});
    const Tensor r = where(cond, a, b);
    EXPECT_EQ(r.shape(), Shape({2, 3}));
    EXPECT_EQ(r.dtype(), dtype);
    EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  }
  // Built from a comparison, on strided inputs: where(x > 0, x, 0) is relu.
  const Tensor x =
      from_vector(std::vector<double>{-1, 2, 3, -4, 5, -6}, {2, 3}, {.dtype = kFloat64})
          .transpose(0, 1);
  const Tensor zero = zeros({1}, {.dtype = kFloat64});
  EXPECT_EQ(where(greater(x, zero), x, zero).to_vector<double>(),
            (std::vector<double>{0, 0, 2, 5, 3, 0}));
  // NaN passes through the selected branch.
  const Tensor n = where(from_vector(std::vector<double>{1, 0}, {2}, {.dtype = kBool}),
                         vec({kNaN, kNaN}), vec({1, 2}));
  const auto nv = n.to_vector<double>();
  EXPECT_TRUE(std::isnan(nv[0]));
  EXPECT_EQ(nv[1], 2.0);
}

TEST(WhereTest, BackwardRoutesGradientsByCondition) {
  const Tensor cond = from_vector(std::vector<double>{1, 0, 0, 1, 1, 0}, {2, 3}, {.dtype = kBool});
  Tensor a = zeros({2, 3}, {.dtype = kFloat64, .requires_grad = true});
  Tensor b = zeros({3}, {.dtype = kFloat64, .requires_grad = true});  // broadcast over rows
  const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = kFloat64});
  const auto g = grad(sum(where(cond, a, b) * w), {a, b});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 0, 0, 4, 5, 0}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{0, 2, 3 + 6}));
  EXPECT_EQ(g[1].shape(), Shape({3}));
}

TEST(WhereTest, Gradcheck) {
  const Tensor cond = from_vector(std::vector<double>{1, 0, 1, 0, 0, 1}, {3, 2}, {.dtype = kBool});
  const Tensor a =
      from_vector(std::vector<double>{0.5, -1, 2, 3, -0.25, 1}, {3, 2}, {.dtype = kFloat64});
  const Tensor b = from_vector(std::vector<double>{4, -2}, {2}, {.dtype = kFloat64});
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) { return where(cond, in[0] * in[0], exp(in[1])); },
      {a, b}));
}

TEST(WhereTest, LowPrecision) {
  const Tensor cond = from_vector(std::vector<double>{1, 0, 1, 1, 0, 0}, {2, 3}, {.dtype = kBool});
  const Tensor a = random_uniform({2, 3}, -2.0, 2.0);
  const Tensor b = random_uniform({2, 3}, -2.0, 2.0);
  for (DType dtype : {kFloat16, kBFloat16}) {
    EXPECT_TRUE(testing::check_low_precision(
        [&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {a, b}, dtype));
  }
}

TEST(WhereTest, Errors) {
  const Tensor a = zeros({2});
  try {
    where(zeros({2}), a, a);
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("bool"), std::string::npos) << e.what();
  }
  const Tensor cond = ones({2}, {.dtype = kBool});
  EXPECT_THROW(where(cond, a, zeros({2}, {.dtype = kFloat16})), DTypeError);
  EXPECT_THROW(where(cond, zeros({3}), zeros({3})), ShapeError);
  EXPECT_THROW(where(cond, zeros({2}, {.dtype = kInt32}), zeros({2}, {.dtype = kInt32})),
               DTypeError);
  EXPECT_THROW(where(Tensor(), a, a), ValueError);
}

TEST(FiniteTest, IsFiniteInEveryFloatingDtype) {
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = vec({1.0, kInf, -kInf, kNaN, 0.0, -3.5}, dtype);
    EXPECT_EQ(bools(is_finite(x)), (std::vector<bool>{true, false, false, false, true, true}));
    EXPECT_FALSE(all_finite(x));
    EXPECT_TRUE(all_finite(vec({1.0, -2.0, 0.0}, dtype)));
    EXPECT_FALSE(all_finite(vec({kNaN}, dtype)));
    EXPECT_FALSE(all_finite(vec({-kInf}, dtype)));
    EXPECT_TRUE(all_finite(zeros({0}, {.dtype = dtype})));
  }
}

TEST(FiniteTest, SixteenBitOverflowIsNotFinite) {
  // 70000 overflows float16 to inf but is finite in bfloat16 and float32: the reason loss scaling
  // checks the gradients in their own dtype.
  const Tensor big = vec({70000.0});
  EXPECT_FALSE(all_finite(big.to(kFloat16)));
  EXPECT_TRUE(all_finite(big.to(kBFloat16)));
  EXPECT_TRUE(all_finite(big.to(kFloat32)));
  // The largest float16 is finite.
  EXPECT_TRUE(all_finite(vec({65504.0}, kFloat16)));
  // Raw bit patterns: 0x7c00 is +inf, 0x7e00 a NaN, 0xfc00 -inf, 0x7bff the largest finite.
  const std::uint16_t bits[] = {0x7c00, 0x7e00, 0xfc00, 0x7bff, 0x0001};
  const Tensor h = from_data(bits, kFloat16, {5}, {.dtype = kFloat16});
  EXPECT_EQ(bools(is_finite(h)), (std::vector<bool>{false, false, false, true, true}));
  const std::uint16_t bbits[] = {0x7f80, 0x7fc0, 0xff80, 0x7f7f};  // bfloat16 +inf, NaN, -inf, max
  const Tensor bf = from_data(bbits, kBFloat16, {4}, {.dtype = kBFloat16});
  EXPECT_EQ(bools(is_finite(bf)), (std::vector<bool>{false, false, false, true}));
}

TEST(FiniteTest, AllFiniteFindsOneBadValueInALargeTensor) {
  // Large enough for the parallel path; the bad value sits in the last chunk, then the first.
  const std::int64_t n = 100003;
  for (DType dtype : {kFloat32, kFloat16}) {
    Tensor x = zeros({n}, {.dtype = dtype});
    EXPECT_TRUE(all_finite(x));
    Tensor y = zeros({n}, {.dtype = kFloat32});
    y.data<float>()[n - 1] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(all_finite(y.to(dtype)));
    y.data<float>()[n - 1] = 0;
    y.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(all_finite(y.to(dtype)));
  }
  // On a strided view only the viewed elements count.
  Tensor z = zeros({4, 2});
  z.data<float>()[1] = std::numeric_limits<float>::infinity();  // element (0, 1)
  EXPECT_TRUE(all_finite(z.slice(1, 0, 1)));
  EXPECT_FALSE(all_finite(z.slice(1, 1, 2)));
}

TEST(FiniteTest, IntegersAreAlwaysFinite) {
  EXPECT_TRUE(all_finite(from_vector(std::vector<std::int32_t>{1, -5}, {2})));
  EXPECT_EQ(bools(is_finite(from_vector(std::vector<std::int64_t>{3}, {1}))),
            (std::vector<bool>{true}));
}

}  // namespace
}  // namespace mixprec
