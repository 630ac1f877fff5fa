// matmul(..., Accumulation): the 16-bit-accumulation path against a sequential-rounding reference
// written here (bitwise), the float16/bfloat16 stall that float32 accumulation avoids, the backward
// against the same reference, and the forwarding of Accumulation::float32 to the plain matmul.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

constexpr Transpose N = Transpose::no;
constexpr Transpose T = Transpose::yes;
constexpr Accumulation k16 = Accumulation::compute_dtype;

// A row-major float matrix holding 16-bit values.
struct Mat {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float at(std::int64_t r, std::int64_t c) const {
    return v[static_cast<std::size_t>(r * cols + c)];
  }
  Mat transposed() const {
    Mat t{cols, rows, std::vector<float>(v.size())};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        t.v[static_cast<std::size_t>(c * rows + r)] = at(r, c);
    return t;
  }
  Mat op(Transpose t) const { return t == T ? transposed() : *this; }
};

// Matrix `index` of a contiguous (..., rows, cols) tensor.
Mat matrix(const Tensor& x, std::int64_t index = 0) {
  const std::vector<float> all = x.to_vector<float>();
  const std::int64_t rows = x.dim(-2), cols = x.dim(-1);
  const auto begin = all.begin() + static_cast<std::ptrdiff_t>(index * rows * cols);
  return {rows, cols, std::vector<float>(begin, begin + rows * cols)};
}

// The sequential 16-bit reference: for each (i, j), s = 0, then for every term in order
// s = S(s + x * y), with x * y in float (exact for 16-bit operands) and S the storage type.
template <typename S>
float round16(float x) {
  return static_cast<float>(S(x));
}

// Sum over the (A_t, B_t) pairs in order of A_t (M x K) B_t (K x N), one running 16-bit sum per
// output element.
template <typename S>
Mat reference(const std::vector<std::pair<Mat, Mat>>& pairs) {
  const std::int64_t m = pairs[0].first.rows, n = pairs[0].second.cols;
  Mat c{m, n, std::vector<float>(static_cast<std::size_t>(m * n))};
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (const auto& [a, b] : pairs) {
        for (std::int64_t k = 0; k < a.cols; ++k) s = round16<S>(s + a.at(i, k) * b.at(k, j));
      }
      c.v[static_cast<std::size_t>(i * n + j)] = s;
    }
  }
  return c;
}

template <typename S>
Mat reference(const Mat& a, const Mat& b) {
  return reference<S>({{a, b}});
}

::testing::AssertionResult bitwise_equal(const Mat& actual, const Mat& expected) {
  if (actual.rows != expected.rows || actual.cols != expected.cols) {
    return ::testing::AssertionFailure() << "shape " << actual.rows << "x" << actual.cols << " vs "
                                         << expected.rows << "x" << expected.cols;
  }
  for (std::size_t i = 0; i < actual.v.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(actual.v[i]) != std::bit_cast<std::uint32_t>(expected.v[i])) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual.v[i] << " vs " << expected.v[i];
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor normal(const Shape& shape, std::uint64_t seed, DType dtype) {
  Generator gen(seed);
  return random_normal(shape, 0.0, 1.0, {.dtype = dtype}, gen);
}

Shape stored(std::int64_t rows, std::int64_t cols, Transpose t) {
  return t == T ? Shape{cols, rows} : Shape{rows, cols};
}

template <typename S>
void check_rank2_forward(DType dtype) {
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " ta=" + (ta == T ? "T" : "N") +
                   " tb=" + (tb == T ? "T" : "N"));
      const std::int64_t m = 5, k = 37, n = 3;
      const Tensor a = normal(stored(m, k, ta), 1, dtype);
      const Tensor b = normal(stored(k, n, tb), 2, dtype);
      const Tensor c = matmul(a, b, ta, tb, k16);
      EXPECT_EQ(c.dtype(), dtype);
      EXPECT_EQ(c.shape(), (Shape{m, n}));
      EXPECT_TRUE(bitwise_equal(matrix(c), reference<S>(matrix(a).op(ta), matrix(b).op(tb))));
    }
  }
}

TEST(MatmulAccumulationTest, Rank2MatchesSequentialReferenceFloat16) {
  check_rank2_forward<float16>(DType::float16);
}

TEST(MatmulAccumulationTest, Rank2MatchesSequentialReferenceBFloat16) {
  check_rank2_forward<bfloat16>(DType::bfloat16);
}

TEST(MatmulAccumulationTest, LargeEnoughForThreadsStillMatchesBitwise) {
  const Tensor a = normal({70, 40}, 3, DType::float16), b = normal({40, 33}, 4, DType::float16);
  EXPECT_TRUE(
      bitwise_equal(matrix(matmul(a, b, N, N, k16)), reference<float16>(matrix(a), matrix(b))));
}

TEST(MatmulAccumulationTest, NonContiguousViews) {
  // A column slice and a transposed view: strided operands without a copy.
  const Tensor base = normal({6, 20}, 5, DType::bfloat16);
  const Tensor a = base.slice(1, 2, 18);                                 // (6, 16), row stride 20
  const Tensor b = normal({8, 16}, 6, DType::bfloat16).transpose(0, 1);  // (16, 8), transposed
  const Tensor c = matmul(a, b, N, N, k16);
  EXPECT_TRUE(bitwise_equal(matrix(c),
                            reference<bfloat16>(matrix(a.contiguous()), matrix(b.contiguous()))));
}

TEST(MatmulAccumulationTest, BatchedWithBroadcasting) {
  // (2, 1, 3, 7) x (4, 7, 5) -> (2, 4, 3, 5): a broadcasts over b's 4, b over a's 2.
  const Tensor a = normal({2, 1, 3, 7}, 7, DType::float16);
  const Tensor b = normal({4, 5, 7}, 8, DType::float16);  // stored transposed
  const Tensor c = matmul(a, b, N, T, k16);
  ASSERT_EQ(c.shape(), (Shape{2, 4, 3, 5}));
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 4; ++j) {
      SCOPED_TRACE("batch " + std::to_string(i) + "," + std::to_string(j));
      EXPECT_TRUE(bitwise_equal(matrix(c, i * 4 + j),
                                reference<float16>(matrix(a, i), matrix(b, j).transposed())));
    }
  }
}

TEST(MatmulAccumulationTest, EmptyExtents) {
  const Tensor a = zeros({3, 0}, {.dtype = DType::float16});
  const Tensor b = zeros({0, 2}, {.dtype = DType::float16});
  const Tensor c = matmul(a, b, N, N, k16);
  ASSERT_EQ(c.shape(), (Shape{3, 2}));
  for (float v : c.to_vector<float>()) EXPECT_EQ(std::bit_cast<std::uint32_t>(v), 0u);  // +0
  EXPECT_EQ(matmul(zeros({0, 4}, {.dtype = DType::bfloat16}),
                   zeros({4, 2}, {.dtype = DType::bfloat16}), N, N, k16)
                .shape(),
            (Shape{0, 2}));
}

// A float16 running sum of K = 4096 ones reaches 2048 and stays there: 2048 + 1 lies halfway
// between the neighbours 2048 and 2050 and rounds to the even 2048. bfloat16 stalls at 256 the same
// way. Float32 accumulation gets 4096, exact in both.
TEST(MatmulAccumulationTest, SixteenBitAccumulationStallsWhereFloat32DoesNot) {
  for (const auto& [dtype, stall] :
       std::vector<std::pair<DType, float>>{{DType::float16, 2048.0f}, {DType::bfloat16, 256.0f}}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor a = ones({1, 4096}, {.dtype = dtype}), b = ones({4096, 1}, {.dtype = dtype});
    EXPECT_EQ(matmul(a, b, N, N, k16).item(), stall);
    EXPECT_EQ(matmul(a, b, N, N, Accumulation::float32).item(), 4096.0);
  }
}

// 0.1 in float16 (0.0999755859375) 4096 times: the exact sum is 409.5 (representable), float32
// accumulation gets it; the float16 sum rounds each 0.1 up to an eighth in [128, 256), then at 256
// (spacing 0.25) adding 0.1 rounds back down and the sum stops at 256.
TEST(MatmulAccumulationTest, SmallTermsStallAtTheFloat16Spacing) {
  const Tensor a = full({1, 4096}, 0.1, {.dtype = DType::float16});
  const Tensor b = ones({4096, 1}, {.dtype = DType::float16});
  EXPECT_EQ(matmul(a, b, N, N, k16).item(), 256.0);
  EXPECT_EQ(matmul(a, b, N, N, Accumulation::float32).item(), 409.5);
}

// Terms of 1 + small (in [1, 1.01)): the float16 sum deviates from the float32-accumulated one by
// far more than the float16 rounding of the result, and equals the sequential reference bitwise.
TEST(MatmulAccumulationTest, OnePlusSmallTermsDriftMeasurably) {
  Generator gen(11);
  const Tensor a = random_uniform({2, 4096}, 1.0, 1.01, {.dtype = DType::float16}, gen);
  const Tensor b = ones({4096, 3}, {.dtype = DType::float16});
  const Tensor c16 = matmul(a, b, N, N, k16);
  const Tensor c32 = matmul(a, b, N, N, Accumulation::float32);
  EXPECT_TRUE(bitwise_equal(matrix(c16), reference<float16>(matrix(a), matrix(b))));
  const std::vector<float> v16 = c16.to_vector<float>(), v32 = c32.to_vector<float>();
  for (std::size_t i = 0; i < v16.size(); ++i) {
    // float16 spacing at ~4100 is 4: the float32-accumulated result is within 2 of the exact sum;
    // the float16-accumulated one is off by more than two spacings.
    EXPECT_GT(std::abs(v16[i] - v32[i]), 8.0f) << i << ": " << v16[i] << " vs " << v32[i];
  }
}

// ---- backward ----

// d op(A) = dC op(B)^T and d op(B) = op(A)^T dC, each with its own sequential 16-bit sum (over j
// for dA, over i for dB), laid out as the stored operand.
template <typename S>
void check_rank2_backward(DType dtype) {
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " ta=" + (ta == T ? "T" : "N") +
                   " tb=" + (tb == T ? "T" : "N"));
      const std::int64_t m = 4, k = 6, n = 29;
      Tensor a = normal(stored(m, k, ta), 21, dtype), b = normal(stored(k, n, tb), 22, dtype);
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      const Tensor g = normal({m, n}, 23, dtype);
      matmul(a, b, ta, tb, k16).backward(g);
      ASSERT_TRUE(a.grad().defined() && b.grad().defined());
      EXPECT_EQ(a.grad().dtype(), dtype);
      const Mat opa = matrix(a.detach()).op(ta), opb = matrix(b.detach()).op(tb);
      const Mat d_opa = reference<S>(matrix(g), opb.transposed());
      const Mat d_opb = reference<S>(opa.transposed(), matrix(g));
      EXPECT_TRUE(bitwise_equal(matrix(a.grad().contiguous()), d_opa.op(ta)));
      EXPECT_TRUE(bitwise_equal(matrix(b.grad().contiguous()), d_opb.op(tb)));
    }
  }
}

TEST(MatmulAccumulationTest, BackwardMatchesSequentialReferenceFloat16) {
  check_rank2_backward<float16>(DType::float16);
}

TEST(MatmulAccumulationTest, BackwardMatchesSequentialReferenceBFloat16) {
  check_rank2_backward<bfloat16>(DType::bfloat16);
}

// A batched A (3, M, K) times an unbatched B (K, N): dB sums over the batch and the rows in one
// running 16-bit sum, batch entry by batch entry.
TEST(MatmulAccumulationTest, BackwardSumsOverTheBroadcastBatch) {
  const DType dt = DType::float16;
  Tensor a = normal({3, 4, 5}, 31, dt), b = normal({5, 6}, 32, dt);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor g = normal({3, 4, 6}, 33, dt);
  matmul(a, b, N, N, k16).backward(g);
  std::vector<std::pair<Mat, Mat>> pairs;
  for (std::int64_t t = 0; t < 3; ++t)
    pairs.emplace_back(matrix(a.detach(), t).transposed(), matrix(g, t));
  EXPECT_TRUE(bitwise_equal(matrix(b.grad()), reference<float16>(pairs)));
  for (std::int64_t t = 0; t < 3; ++t) {
    EXPECT_TRUE(bitwise_equal(matrix(a.grad(), t),
                              reference<float16>(matrix(g, t), matrix(b.detach()).transposed())));
  }
}

// The 16-bit backward stays close to the exact gradient (float64 products of the same values):
// within the K-term float16 accumulation bound, which is loose but catches wrong terms or layout.
TEST(MatmulAccumulationTest, BackwardIsCloseToTheFloat64Gradient) {
  Tensor a = normal({3, 8}, 41, DType::float16), b = normal({8, 5}, 42, DType::float16);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor g = normal({3, 5}, 43, DType::float16);
  matmul(a, b, N, N, k16).backward(g);
  const Tensor g64 = g.to(DType::float64);
  const Tensor da = matmul(g64, b.detach().to(DType::float64), N, T);
  const Tensor db = matmul(a.detach().to(DType::float64), g64, T, N);
  EXPECT_TRUE(testing::all_close(a.grad(), da, {2e-2, 2e-2}));
  EXPECT_TRUE(testing::all_close(b.grad(), db, {2e-2, 2e-2}));
}

TEST(MatmulAccumulationTest, OnlyTheOperandsThatNeedGradientsGetThem) {
  Tensor a = normal({3, 4}, 51, DType::bfloat16);
  const Tensor b = normal({4, 2}, 52, DType::bfloat16);
  a.set_requires_grad(true);
  matmul(a, b, N, N, k16).backward(ones({3, 2}, {.dtype = DType::bfloat16}));
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  const Tensor c = [&] {
    NoGradScope no_grad;
    return matmul(a, b, N, N, k16);
  }();
  EXPECT_FALSE(c.requires_grad());
}

// ---- forwarding and errors ----

TEST(MatmulAccumulationTest, Float32AccumulationIsThePlainMatmul) {
  for (DType dt : {DType::float16, DType::bfloat16, DType::float32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = normal({2, 9, 30}, 61, dt), b = normal({30, 7}, 62, dt);
    const std::vector<float> plain = matmul(a, b).to_vector<float>();
    const std::vector<float> f32 = matmul(a, b, N, N, Accumulation::float32).to_vector<float>();
    EXPECT_EQ(f32, plain);
  }
  // compute_dtype accumulation of float32/float64 operands is float32/float64 accumulation.
  const Tensor a = normal({4, 30}, 63, DType::float32), b = normal({30, 5}, 64, DType::float32);
  EXPECT_EQ(matmul(a, b, N, N, k16).to_vector<float>(), matmul(a, b).to_vector<float>());
}

TEST(MatmulAccumulationTest, Float64GradientsThroughTheForwardingPath) {
  const auto f = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1], N, T, k16); };
  EXPECT_TRUE(testing::gradcheck(
      f, {normal({3, 4}, 71, DType::float64), normal({5, 4}, 72, DType::float64)}));
}

TEST(MatmulAccumulationTest, Errors) {
  const auto h = [](const Shape& s) { return zeros(s, {.dtype = DType::float16}); };
  EXPECT_THROW(matmul(h({4}), h({4, 2}), N, N, k16), ShapeError);
  EXPECT_THROW(matmul(h({3, 4}), h({5, 2}), N, N, k16), ShapeError);
  EXPECT_EQ(matmul(h({3, 4}), h({3, 2}), T, N, k16).shape(), (Shape{4, 2}));  // (4, 3) x (3, 2)
  EXPECT_THROW(matmul(h({2, 3, 4}), h({3, 4, 2}), N, N, k16), ShapeError);    // batch 2 vs 3
  EXPECT_THROW(matmul(h({3, 4}), zeros({4, 2}, {.dtype = DType::bfloat16}), N, N, k16), DTypeError);
  EXPECT_THROW(matmul(zeros({3, 4}, {.dtype = DType::int32}),
                      zeros({4, 2}, {.dtype = DType::int32}), N, N, k16),
               DTypeError);
  EXPECT_THROW(matmul(Tensor(), h({4, 2}), N, N, k16), ValueError);
  try {
    matmul(h({3, 4}), h({5, 2}), N, N, k16);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 4) x (5, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
