// argmax and one_hot: values against expectations computed here, ties, NaN, every input dtype,
// and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

// NumPy's argmax over `axis` of a row-major array, written out plainly: the first maximum, and the
// first NaN if there is one.
std::vector<std::int64_t> reference_argmax(const std::vector<double>& x, const Shape& shape,
                                           int axis) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (int i = axis + 1; i < shape.rank(); ++i) inner *= shape[i];
  const std::int64_t length = shape[axis];
  std::vector<std::int64_t> out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      std::int64_t best = 0;
      for (std::int64_t l = 0; l < length; ++l) {
        const double v = x[static_cast<std::size_t>((o * length + l) * inner + j)];
        const double b = x[static_cast<std::size_t>((o * length + best) * inner + j)];
        if (std::isnan(v)) {
          best = l;
          break;
        }
        if (v > b) best = l;
      }
      out.push_back(best);
    }
  }
  return out;
}

Tensor random_ints(const Shape& shape, DType dtype, std::uint64_t seed, double high = 5) {
  // Small integers, so that ties are frequent.
  Generator gen(seed);
  const Tensor u = random_uniform(shape, 0.0, high, {.dtype = DType::float64}, gen);
  std::vector<double> v = u.to_vector<double>();
  for (double& d : v) d = std::floor(d);
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(IndexingArgmax, MatchesReferenceOnEveryAxisAndDType) {
  const Shape shape{4, 5, 6};
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                      DType::int64, DType::uint8}) {
    const Tensor x = random_ints(shape, dtype, 1);
    const auto values = x.to_vector<double>();
    for (int axis = 0; axis < 3; ++axis) {
      const Tensor idx = argmax(x, axis);
      EXPECT_EQ(idx.dtype(), DType::int64);
      std::vector<std::int64_t> dims(shape.begin(), shape.end());
      dims.erase(dims.begin() + axis);
      EXPECT_EQ(idx.shape(), Shape(dims));
      EXPECT_EQ(idx.to_vector<std::int64_t>(), reference_argmax(values, shape, axis))
          << dtype_name(dtype) << " axis " << axis;
    }
  }
}

TEST(IndexingArgmax, NegativeAxisAndKeepDims) {
  const Tensor x = random_ints({3, 4}, DType::float32, 2, 100);
  const auto values = x.to_vector<double>();
  const Tensor k = argmax(x, -1, KeepDims::yes);
  EXPECT_EQ(k.shape(), (Shape{3, 1}));
  EXPECT_EQ(k.to_vector<std::int64_t>(), reference_argmax(values, x.shape(), 1));
  const Tensor k0 = argmax(x, -2, KeepDims::yes);
  EXPECT_EQ(k0.shape(), (Shape{1, 4}));
  EXPECT_EQ(k0.to_vector<std::int64_t>(), reference_argmax(values, x.shape(), 0));
}

TEST(IndexingArgmax, TiesGiveTheFirstIndex) {
  const Tensor x = from_vector(std::vector<double>{1, 3, 3, 2,  //
                                                   7, 7, 7, 7,  //
                                                   0, 0, 0, 5},
                               {3, 4});
  EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 3}));
  // Over axis 0 (strided): column 0: 1,7,0 -> 1; column 1: 3,7,0 -> 1; column 3: 2,7,5 -> 1.
  EXPECT_EQ(argmax(x, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1, 1, 1}));
  const Tensor cols = from_vector(std::vector<double>{4, 9, 4, 9}, {2, 2});
  EXPECT_EQ(argmax(cols, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0}));
  // All -inf: the first index.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(argmax(from_vector(std::vector<double>{-inf, -inf}, {2}), 0).item(), 0.0);
  EXPECT_EQ(argmax(from_vector(std::vector<double>{-inf, inf, inf}, {3}), 0).item(), 1.0);
}

TEST(IndexingArgmax, NaNIsTheMaximumLikeNumPy) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    const Tensor x = from_vector(std::vector<double>{1, nan, 5, nan,  //
                                                     inf, 2, nan, 3,  //
                                                     nan, 9, 9, 1,    //
                                                     -1, -2, -3, -4},
                                 {4, 4}, {.dtype = dtype});
    EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 0, 0}))
        << dtype_name(dtype);
    // Column-wise (the tiled path): column 0: 1, inf, nan, -1 -> 2; column 1: nan first -> 0;
    // column 2: 5, nan -> 1; column 3: nan -> 0.
    EXPECT_EQ(argmax(x, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0, 1, 0}))
        << dtype_name(dtype);
  }
}

TEST(IndexingArgmax, Int64ComparesExactly) {
  // 2^53 and 2^53 + 1 are one value in double and in float; argmax must still tell them apart.
  // from_data copies the bytes (from_vector would pass the values through double).
  const std::int64_t big = std::int64_t{1} << 53;
  const std::vector<std::int64_t> v = {big, big + 1, big, -big};
  const Tensor x = from_data(v.data(), DType::int64, {4}, {.dtype = DType::int64});
  ASSERT_EQ(x.data<std::int64_t>()[1], big + 1);
  EXPECT_EQ(argmax(x, 0).item(), 1.0);
  const std::vector<std::int64_t> w = {big + 1, big + 3, big + 2, big + 3};
  EXPECT_EQ(argmax(from_data(w.data(), DType::int64, {2, 2}, {.dtype = DType::int64}), 0)
                .to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{1, 0}));
  const std::vector<std::int64_t> lows(2, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(argmax(from_data(lows.data(), DType::int64, {2}, {.dtype = DType::int64}), 0).item(),
            0.0);
}

TEST(IndexingArgmax, BoolAndUInt8) {
  const Tensor b =
      from_vector(std::vector<std::int32_t>{0, 0, 1, 1, 0, 0}, {2, 3}, {.dtype = DType::bool_});
  EXPECT_EQ(argmax(b, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0}));
  const Tensor u =
      from_vector(std::vector<std::int32_t>{3, 255, 254, 0}, {4}, {.dtype = DType::uint8});
  EXPECT_EQ(argmax(u, 0).item(), 1.0);
}

TEST(IndexingArgmax, LongRowsWideColumnsAndViews) {
  // Rows longer than one chunk (1024) and more than one chunk of columns.
  Generator gen(3);
  for (const Shape& shape : {Shape{3, 2500}, Shape{2, 7, 2100}}) {
    const Tensor x = random_normal(shape, 0, 1, {.dtype = DType::float16}, gen);
    const auto values = x.to_vector<double>();
    for (int axis = 0; axis < shape.rank(); ++axis) {
      EXPECT_EQ(argmax(x, axis).to_vector<std::int64_t>(), reference_argmax(values, shape, axis))
          << shape.to_string() << " axis " << axis;
    }
  }
  const Tensor base = random_normal({6, 5}, 0, 1, {}, gen);
  const Tensor view = base.transpose(0, 1).slice(1, 1, 6, 2);  // (5, 3), strided
  EXPECT_EQ(argmax(view, 1).to_vector<std::int64_t>(),
            reference_argmax(view.to_vector<double>(), view.shape(), 1));
}

TEST(IndexingArgmax, IsNotDifferentiable) {
  Tensor x = random_normal({3, 4});
  x.set_requires_grad(true);
  const Tensor idx = argmax(x, 1);
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_EQ(idx.grad_fn(), nullptr);
}

TEST(IndexingArgmax, Errors) {
  const Tensor x = zeros({2, 3});
  try {
    argmax(x, 2);
    FAIL() << "no exception";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("argmax"), std::string::npos) << m;
    EXPECT_NE(m.find("axis 2"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
  }
  EXPECT_THROW(argmax(x, -3), ShapeError);
  EXPECT_THROW(argmax(zeros({2, 0}), 1), ShapeError);
  // An empty tensor whose reduced axis is not empty gives an empty result.
  EXPECT_EQ(argmax(zeros({0, 3}), 1).shape(), (Shape{0}));
}

// ---- one_hot ----

TEST(IndexingOneHot, ValuesForEveryIndexDType) {
  const std::vector<std::int32_t> indices = {2, 0, 4, 4, 1, 3};
  const std::int64_t depth = 5;
  std::vector<double> expected(indices.size() * depth, 0.0);
  for (std::size_t i = 0; i < indices.size(); ++i)
    expected[i * depth + static_cast<std::size_t>(indices[i])] = 1.0;
  for (DType index_dtype : {DType::int32, DType::int64, DType::uint8}) {
    const Tensor idx = from_vector(indices, {2, 3}, {.dtype = index_dtype});
    const Tensor h = one_hot(idx, depth);
    EXPECT_EQ(h.dtype(), DType::float32);
    EXPECT_EQ(h.shape(), (Shape{2, 3, 5}));
    EXPECT_EQ(h.to_vector<double>(), expected) << dtype_name(index_dtype);
  }
}

TEST(IndexingOneHot, OutputDTypes) {
  const Tensor idx = from_vector(std::vector<std::int64_t>{1, 0, 2}, {3});
  const std::vector<double> expected = {0, 1, 0, 1, 0, 0, 0, 0, 1};
  for (DType dtype : {DType::float16, DType::bfloat16, DType::float64, DType::int32, DType::int64,
                      DType::uint8, DType::bool_}) {
    const Tensor h = one_hot(idx, 3, dtype);
    EXPECT_EQ(h.dtype(), dtype);
    EXPECT_EQ(h.to_vector<double>(), expected) << dtype_name(dtype);
  }
}

TEST(IndexingOneHot, ScalarAndStridedIndices) {
  const Tensor s = one_hot(from_vector(std::vector<std::int64_t>{2}, {}), 4);
  EXPECT_EQ(s.shape(), (Shape{4}));
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 0, 1, 0}));
  // A transposed view: (2, 3) -> (3, 2), read in its own row-major order.
  const Tensor base = from_vector(std::vector<std::int32_t>{0, 1, 2, 2, 1, 0}, {2, 3});
  const Tensor t = one_hot(base.transpose(0, 1), 3);
  EXPECT_EQ(t.shape(), (Shape{3, 2, 3}));
  // transposed values: (0, 2), (1, 1), (2, 0)
  EXPECT_EQ(t.to_vector<double>(),
            (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(one_hot(zeros({0}, {.dtype = DType::int64}), 3).shape(), (Shape{0, 3}));
}

TEST(IndexingOneHot, OutOfRangeIndexIsAValueErrorNamingValueAndDepth) {
  for (std::int64_t bad : {5, -1, 7}) {
    const Tensor idx = from_vector(std::vector<std::int64_t>{0, 1, bad, 2}, {4});
    try {
      one_hot(idx, 5);
      FAIL() << "no exception for " << bad;
    } catch (const ValueError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("one_hot"), std::string::npos) << m;
      EXPECT_NE(m.find("index " + std::to_string(bad)), std::string::npos) << m;
      EXPECT_NE(m.find("depth 5"), std::string::npos) << m;
    }
  }
  // uint8 indices print as numbers, not characters.
  try {
    one_hot(from_vector(std::vector<std::int32_t>{65}, {1}, {.dtype = DType::uint8}), 10);
    FAIL() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("index 65"), std::string::npos) << e.what();
  }
}

TEST(IndexingOneHot, BadDTypeAndDepth) {
  try {
    one_hot(zeros({3}), 4);
    FAIL() << "no exception";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("one_hot"), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
  }
  EXPECT_THROW(one_hot(zeros({3}, {.dtype = DType::bool_}), 4), DTypeError);
  EXPECT_THROW(one_hot(from_vector(std::vector<std::int64_t>{0}, {1}), -1), ValueError);
  EXPECT_THROW(one_hot(from_vector(std::vector<std::int64_t>{0}, {1}), 0), ValueError);
}

}  // namespace
}  // namespace mixprec
