// concat: values against an index-by-index expectation built here, views as inputs, every dtype,
// float64 gradcheck, the gradient split, and the error messages.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::gradcheck;

// The concatenation of row-major arrays along `axis`, element by element: output index
// (o, p, j) takes input k at (o, p - start_k, j).
std::vector<double> reference_concat(const std::vector<Tensor>& inputs, int axis) {
  const Shape& first = inputs[0].shape();
  std::int64_t outer = 1, inner = 1, total = 0;
  for (int i = 0; i < axis; ++i) outer *= first[i];
  for (int i = axis + 1; i < first.rank(); ++i) inner *= first[i];
  std::vector<std::vector<double>> values;
  for (const Tensor& t : inputs) {
    values.push_back(t.to_vector<double>());
    total += t.shape()[axis];
  }
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t p = 0; p < total; ++p) {
      std::size_t k = 0;
      std::int64_t local = p;
      while (local >= inputs[k].shape()[axis]) local -= inputs[k++].shape()[axis];
      const std::int64_t length = inputs[k].shape()[axis];
      for (std::int64_t j = 0; j < inner; ++j) {
        out.push_back(values[k][static_cast<std::size_t>((o * length + local) * inner + j)]);
      }
    }
  }
  return out;
}

Shape with_extent(Shape shape, int axis, std::int64_t extent) {
  shape[axis] = extent;
  return shape;
}

::testing::AssertionResult matches_reference(const std::vector<Tensor>& inputs, int axis) {
  const Tensor out = concat(inputs, axis);
  std::int64_t total = 0;
  for (const Tensor& t : inputs) total += t.shape()[axis];
  const Shape expected_shape = with_extent(inputs[0].shape(), axis, total);
  if (out.shape() != expected_shape) {
    return ::testing::AssertionFailure()
           << "shape " << out.shape().to_string() << ", expected " << expected_shape.to_string();
  }
  if (out.dtype() != inputs[0].dtype()) return ::testing::AssertionFailure() << "dtype changed";
  const auto got = out.to_vector<double>();
  const auto want = reference_concat(inputs, axis);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor counting(const Shape& shape, DType dtype, double start) {
  // Distinct values (small integers, exact in every dtype up to uint8's 255).
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(ConcatValues, TwoInputsOnEachAxis) {
  const Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector(std::vector<double>{7, 8, 9}, {1, 3});
  const Tensor c = concat({a, b}, 0);
  EXPECT_EQ(c.shape(), (Shape{3, 3}));
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const Tensor d = from_vector(std::vector<double>{10, 20}, {2, 1});
  const Tensor e = concat({a, d}, 1);
  EXPECT_EQ(e.shape(), (Shape{2, 4}));
  EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{1, 2, 3, 10, 4, 5, 6, 20}));
  EXPECT_EQ(concat({a, d}, -1).to_vector<double>(), e.to_vector<double>());
}

TEST(ConcatValues, ThreeInputsOnEveryAxisOfRank3) {
  const Shape base{2, 3, 4};
  for (int axis = 0; axis < 3; ++axis) {
    const std::vector<Tensor> inputs = {counting(with_extent(base, axis, 1), DType::float32, 0),
                                        counting(with_extent(base, axis, 3), DType::float32, 100),
                                        counting(with_extent(base, axis, 2), DType::float32, 200)};
    EXPECT_TRUE(matches_reference(inputs, axis)) << "axis " << axis;
  }
}

TEST(ConcatValues, EveryDType) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                      DType::int64, DType::uint8}) {
    const std::vector<Tensor> inputs = {counting({2, 2, 3}, dtype, 1),
                                        counting({2, 1, 3}, dtype, 50),
                                        counting({2, 4, 3}, dtype, 100)};
    EXPECT_TRUE(matches_reference(inputs, 1)) << dtype_name(dtype);
  }
  const Tensor t = from_vector(std::vector<std::int32_t>{1, 0, 1}, {3}, {.dtype = DType::bool_});
  const Tensor f = from_vector(std::vector<std::int32_t>{0, 0}, {2}, {.dtype = DType::bool_});
  const Tensor tf = concat({t, f, t}, 0);
  EXPECT_EQ(tf.dtype(), DType::bool_);
  EXPECT_EQ(tf.to_vector<double>(), (std::vector<double>{1, 0, 1, 0, 0, 1, 0, 1}));
  // int64 values beyond 2^53 survive (a byte copy, no trip through double).
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const std::int64_t values[2] = {big, -big};
  const Tensor i = concat({from_data(&values[0], DType::int64, {1}, {.dtype = DType::int64}),
                           from_data(&values[1], DType::int64, {1}, {.dtype = DType::int64})},
                          0);
  EXPECT_EQ(i.data<std::int64_t>()[0], big);
  EXPECT_EQ(i.data<std::int64_t>()[1], -big);
}

TEST(ConcatValues, ViewsAsInputs) {
  const Tensor base = counting({4, 6}, DType::float32, 0);
  const Tensor transposed = base.transpose(0, 1);  // (6, 4), strided
  const Tensor stepped = base.slice(1, 0, 6, 2);   // (4, 3), strided
  const Tensor rows = base.slice(0, 1, 3);         // (2, 6), contiguous with an offset
  const Tensor other = counting({6, 2}, DType::float32, 500);
  EXPECT_TRUE(matches_reference({transposed, other, transposed}, 1));
  EXPECT_TRUE(matches_reference({stepped, base.slice(1, 1, 6, 2)}, 1));
  EXPECT_TRUE(matches_reference({rows, base, rows}, 0));
  EXPECT_TRUE(matches_reference({transposed.slice(0, 2, 5), stepped.transpose(0, 1)}, 0));
}

TEST(ConcatValues, SingleAndEmptyInputs) {
  const Tensor a = counting({2, 3}, DType::float32, 0);
  const Tensor one = concat({a}, 1);
  EXPECT_EQ(one.to_vector<double>(), a.to_vector<double>());
  EXPECT_FALSE(one.same(a));
  const Tensor empty = zeros({2, 0});
  EXPECT_TRUE(matches_reference({empty, a, empty}, 1));
  EXPECT_EQ(concat({empty, empty}, 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(concat({zeros({0, 3}), zeros({0, 3})}, 1).shape(), (Shape{0, 6}));
}

TEST(ConcatGradient, GradcheckFloat64) {
  Generator gen(1);
  const auto r = [&](const Shape& s) {
    return random_normal(s, 0, 1, {.dtype = DType::float64}, gen);
  };
  const Tensor a = r({2, 3, 4}), b = r({2, 1, 4}), c = r({2, 2, 4});
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return concat(in, 1); }, {a, b, c}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return concat(in, 0); },
                        {r({1, 3}), r({3, 3})}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return concat(in, -1); },
                        {r({3, 2}), r({3, 1}), r({3, 4})}));
  // Through views, and with an input used twice: its gradient is the sum of its two slices.
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return mul(concat({in[0].transpose(0, 1), in[1], in[0].transpose(0, 1)}, 0),
                   concat({in[1], in[1], in[1]}, 0));
      },
      {r({2, 3}), r({3, 2})}));
}

TEST(ConcatGradient, EachInputGetsItsSlice) {
  Tensor a = zeros({2, 2}), b = zeros({2, 1}), c = zeros({2, 3});
  a.set_requires_grad(true);
  c.set_requires_grad(true);                // b does not require a gradient
  const Tensor out = concat({a, b, c}, 1);  // (2, 6)
  ASSERT_TRUE(out.requires_grad());
  EXPECT_EQ(out.grad_fn()->name(), "ConcatBackward");
  const Tensor g = counting({2, 6}, DType::float32, 0);  // 0..5 / 6..11
  out.backward(g);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 6, 7}));
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{3, 4, 5, 9, 10, 11}));
  EXPECT_FALSE(b.grad().defined());
  // The gradient pieces are copies: writing into one leaves g unchanged.
  a.grad().data<float>()[0] = 42;
  EXPECT_EQ(g.to_vector<double>()[0], 0.0);
}

TEST(ConcatGradient, LowPrecisionMatchesFloat32) {
  Generator gen(2);
  const Tensor a = random_normal({3, 4}, 0, 1, {}, gen), b = random_normal({3, 2}, 0, 1, {}, gen);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    EXPECT_TRUE(testing::check_low_precision(
        [](const std::vector<Tensor>& in) { return concat(in, 1); }, {a, b}, dtype))
        << dtype_name(dtype);
  }
}

TEST(ConcatGradient, NoGraphWithoutGrad) {
  Tensor a = zeros({2});
  EXPECT_FALSE(concat({a, a}, 0).requires_grad());
  a.set_requires_grad(true);
  NoGradScope no_grad;
  EXPECT_FALSE(concat({a, a}, 0).requires_grad());
}

TEST(ConcatErrors, DTypeMismatchNamesOpIndexAndShapes) {
  const Tensor a = zeros({2, 3});
  const Tensor b = zeros({2, 4}, {.dtype = DType::float16});
  try {
    concat({a, a, b}, 1);
    FAIL() << "no exception";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("concat"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor 2"), std::string::npos) << m;
    EXPECT_NE(m.find("float16 (2, 4)"), std::string::npos) << m;
    EXPECT_NE(m.find("float32 (2, 3)"), std::string::npos) << m;
  }
}

TEST(ConcatErrors, ShapeMismatchNamesOpIndexAndShapes) {
  const Tensor a = zeros({2, 3});
  try {
    concat({a, zeros({3, 5})}, 1);
    FAIL() << "no exception";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("concat"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor 1"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 5)"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
  }
  try {
    concat({a, zeros({2, 3, 1})}, 0);
    FAIL() << "no exception";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tensor 1"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("rank"), std::string::npos) << m;
  }
}

TEST(ConcatErrors, AxisOutOfRangeNamesAxisAndRank) {
  const Tensor a = zeros({2, 3});
  for (int axis : {2, -3}) {
    try {
      concat({a, a}, axis);
      FAIL() << "no exception for axis " << axis;
    } catch (const ShapeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("concat"), std::string::npos) << m;
      EXPECT_NE(m.find("axis " + std::to_string(axis)), std::string::npos) << m;
      EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
    }
  }
  EXPECT_THROW(concat({scalar(1), scalar(2)}, 0), ShapeError);
}

TEST(ConcatErrors, EmptyListAndUndefinedTensor) {
  EXPECT_THROW(concat({}, 0), ValueError);
  EXPECT_THROW(concat({zeros({2}), Tensor()}, 0), ValueError);
}

}  // namespace
}  // namespace mixprec
