// matmul: the oneDNN / blocked-loop backend against the float64 reference for many geometries,
// gradients (float64 finite differences), 16-bit storage against float32, errors, and the
// primitive cache.
#include "backend/cpu/matmul.h"

#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/matmul_long_inner.h"
#include "backend/cpu/matmul_reference.h"
#include "core/allocator.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::Bf16PathGuard;
using testing::check_low_precision;
using testing::gradcheck;

constexpr Transpose N = Transpose::no;
constexpr Transpose T = Transpose::yes;

Tensor normal(const Shape& shape, std::uint64_t seed, double stddev = 1.0,
              DType dtype = DType::float32) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {.dtype = dtype}, gen);
}

// The stored shape of an operand whose op() is (rows, cols), with `batch` axes in front.
Shape stored(std::vector<std::int64_t> batch, std::int64_t rows, std::int64_t cols, Transpose t) {
  batch.push_back(t == T ? cols : rows);
  batch.push_back(t == T ? rows : cols);
  return Shape(batch);
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::float64: return std::ldexp(1.0, -53);
    case DType::float16: return std::ldexp(1.0, -11);
    case DType::bfloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

// `actual` against the exact (float64) product of the stored values of a and b, within the
// rounding-error bound of a K-term sum accumulated in float32 (float64 for float64) and rounded
// once to the output dtype:
//   |actual - exact| <= K u_acc (|op(A)| |op(B)|) + u_out |exact| (+ half the smallest float16
//   subnormal). The bound is rigorous, so the test cannot flake, and a wrong index, stride or
// transpose gives errors of the size of the values themselves, far outside it.
::testing::AssertionResult matches_reference(const Tensor& actual, const Tensor& a, const Tensor& b,
                                             Transpose ta = N, Transpose tb = N) {
  const DType dtype = a.dtype();
  if (actual.dtype() != dtype) {
    return ::testing::AssertionFailure() << "dtype " << dtype_name(actual.dtype());
  }
  const Tensor a64 = a.detach().to(DType::float64), b64 = b.detach().to(DType::float64);
  const Tensor exact = cpu::matmul_reference(a64, b64, ta, tb);
  const Tensor magnitude = cpu::matmul_reference(abs(a64), abs(b64), ta, tb);
  if (actual.shape() != exact.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << actual.shape().to_string() << ", expected " << exact.shape().to_string();
  }
  const double k = static_cast<double>(ta == T ? a.dim(-2) : a.dim(-1));
  const double u_acc = unit_roundoff(dtype == DType::float64 ? dtype : DType::float32);
  const double u_out = unit_roundoff(dtype);
  const double floor = dtype == DType::float16 ? std::ldexp(1.0, -25) : 1e-300;
  const auto got = actual.to_vector<double>(), want = exact.to_vector<double>();
  const auto mag = magnitude.to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = 1.01 * k * u_acc * mag[i] + u_out * std::abs(want[i]) + floor;
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << actual.shape().to_string() << ": " << got[i]
             << " vs exact " << want[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> kShapes = {
    {1, 1, 1}, {7, 13, 5}, {1, 9, 1}, {5, 1, 3}, {64, 128, 32}, {33, 65, 17}, {32, 784, 10}};

// ---- forward against the reference ----

TEST(MatmulForward, MatchesReferenceForManyShapesAndAllTransposes) {
  std::uint64_t seed = 1;
  for (const auto& [m, k, n] : kShapes) {
    for (Transpose ta : {N, T}) {
      for (Transpose tb : {N, T}) {
        const Tensor a = normal(stored({}, m, k, ta), seed++);
        const Tensor b = normal(stored({}, k, n, tb), seed++);
        const Tensor c = matmul(a, b, ta, tb);
        EXPECT_EQ(c.shape(), (Shape{m, n}));
        EXPECT_TRUE(c.is_contiguous());
        EXPECT_TRUE(matches_reference(c, a, b, ta, tb))
            << m << "x" << k << "x" << n << " ta=" << (ta == T) << " tb=" << (tb == T);
      }
    }
  }
}

TEST(MatmulForward, Batched) {
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      const Tensor a = normal(stored({4}, 7, 13, ta), 11);
      const Tensor b = normal(stored({4}, 13, 5, tb), 12);
      const Tensor c = matmul(a, b, ta, tb);
      EXPECT_EQ(c.shape(), (Shape{4, 7, 5}));
      EXPECT_TRUE(matches_reference(c, a, b, ta, tb));
    }
  }
  const Tensor a = normal({2, 3, 6, 8}, 13), b = normal({2, 3, 8, 4}, 14);
  EXPECT_TRUE(matches_reference(matmul(a, b), a, b));
}

TEST(MatmulForward, BroadcastBatch) {
  struct Case {
    Shape a, b, out;
    Transpose ta, tb;
  };
  const std::vector<Case> cases = {
      {{2, 1, 7, 13}, {3, 13, 5}, {2, 3, 7, 5}, N, N},
      {{7, 13}, {4, 13, 5}, {4, 7, 5}, N, N},           // rank-2 A under a batched B
      {{4, 7, 13}, {13, 5}, {4, 7, 5}, N, N},           // batched A, rank-2 B (folded rows)
      {{4, 7, 13}, {5, 13}, {4, 7, 5}, N, T},           // ... with B transposed
      {{4, 13, 7}, {13, 5}, {4, 7, 5}, T, N},           // A transposed: no fold
      {{1, 7, 13}, {4, 13, 5}, {4, 7, 5}, N, N},        // extent-1 batch
      {{2, 3, 7, 13}, {1, 13, 5}, {2, 3, 7, 5}, N, N},  // B with an extent-1 batch axis
      {{3, 7, 13}, {2, 1, 13, 5}, {2, 3, 7, 5}, N, N},  // B of higher rank
      {{5, 7}, {2, 3, 5, 4}, {2, 3, 7, 4}, T, N},
  };
  std::uint64_t seed = 100;
  for (const Case& c : cases) {
    const Tensor a = normal(c.a, seed++), b = normal(c.b, seed++);
    const Tensor out = matmul(a, b, c.ta, c.tb);
    EXPECT_EQ(out.shape(), c.out) << c.a.to_string() << " x " << c.b.to_string();
    EXPECT_TRUE(matches_reference(out, a, b, c.ta, c.tb))
        << c.a.to_string() << " x " << c.b.to_string();
  }
}

TEST(MatmulForward, NonContiguousInputs) {
  const Tensor base = normal({24, 40}, 21);
  const Tensor w = normal({40, 9}, 22);
  // A transposed view (column-major): (40, 24) with strides (1, 40).
  const Tensor at = base.transpose(0, 1);
  const Tensor wt = normal({24, 9}, 23);
  EXPECT_TRUE(matches_reference(matmul(at, wt), at, wt));
  // A column slice: row-major with a padded leading dimension.
  const Tensor cols = base.slice(1, 3, 30);
  const Tensor w27 = normal({27, 9}, 24);
  EXPECT_TRUE(matches_reference(matmul(cols, w27), cols, w27));
  // Both strides != 1 (every other column): copied before oneDNN.
  const Tensor every_other = base.slice(1, 0, 40, 2);
  const Tensor w20 = normal({20, 9}, 25);
  EXPECT_TRUE(matches_reference(matmul(every_other, w20), every_other, w20));
  // A transposed view passed with Transpose::yes: back to the row-major storage.
  const Tensor bt = normal({40, 5}, 26).transpose(0, 1);  // (5, 40)
  EXPECT_TRUE(matches_reference(matmul(at, bt, T, T), at, bt, T, T));
  // Permuted batch axes: (6, 4, 10) viewed as (4, 6, 10), and a batch axis innermost in memory.
  const Tensor batched = normal({6, 4, 10}, 27).permute({1, 0, 2});
  const Tensor rhs = normal({4, 10, 3}, 28);
  EXPECT_TRUE(matches_reference(matmul(batched, rhs), batched, rhs));
  const Tensor inner_batch =
      normal({6, 10, 4}, 29).permute({2, 0, 1});  // (4, 6, 10), batch stride 1
  EXPECT_TRUE(matches_reference(matmul(inner_batch, rhs), inner_batch, rhs));
  const Tensor same_batch = broadcast_to(normal({1, 6, 10}, 33), {4, 6, 10});  // batch stride 0
  EXPECT_TRUE(matches_reference(matmul(same_batch, rhs), same_batch, rhs));
  // A stride-0 broadcast view.
  const Tensor row = normal({1, 10}, 30);
  const Tensor repeated = broadcast_to(row, {5, 10});
  const Tensor w10 = normal({10, 3}, 31);
  EXPECT_TRUE(matches_reference(matmul(repeated, w10), repeated, w10));
  // 16-bit non-contiguous operands go through the float32 conversion with their layout.
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    const Tensor h = base.to(dtype);
    const Tensor hw = wt.to(dtype);
    EXPECT_TRUE(matches_reference(matmul(h.transpose(0, 1), hw), h.transpose(0, 1), hw));
    const Tensor hs = h.slice(1, 0, 40, 2);
    EXPECT_TRUE(matches_reference(matmul(hs, w20.to(dtype)), hs, w20.to(dtype)));
    const Tensor narrow = h.slice(1, 5, 8);  // a narrow slice: gathered, not span-converted
    const Tensor w3 = normal({3, 4}, 32).to(dtype);
    EXPECT_TRUE(matches_reference(matmul(narrow, w3), narrow, w3));
  }
}

TEST(MatmulForward, Float64BlockedLoopMatchesReference) {
  // Larger than the loop's (16, 128, 256) blocks in every direction, odd everywhere.
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      const Tensor a = normal(stored({}, 37, 300, ta), 41, 1.0, DType::float64);
      const Tensor b = normal(stored({}, 300, 270, tb), 42, 1.0, DType::float64);
      EXPECT_TRUE(matches_reference(matmul(a, b, ta, tb), a, b, ta, tb));
    }
  }
  const Tensor a = normal({3, 1, 5, 7}, 43, 1.0, DType::float64);
  const Tensor b = normal({2, 7, 4}, 44, 1.0, DType::float64);
  EXPECT_TRUE(matches_reference(matmul(a, b), a, b));
}

TEST(MatmulForward, SixteenBitMatchesReference) {
  std::uint64_t seed = 200;
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (const auto& [m, k, n] : kShapes) {
      for (Transpose ta : {N, T}) {
        for (Transpose tb : {N, T}) {
          const Tensor a = normal(stored({}, m, k, ta), seed++).to(dtype);
          const Tensor b =
              normal(stored({}, k, n, tb), seed++, 1.0 / std::sqrt(double(k))).to(dtype);
          EXPECT_TRUE(matches_reference(matmul(a, b, ta, tb), a, b, ta, tb))
              << dtype_name(dtype) << " " << m << "x" << k << "x" << n;
        }
      }
    }
  }
}

// The float32-conversion path computes exactly the float32 product of the stored values, rounded
// once: bit-identical to float32 matmul of the widened operands followed by one cast.
TEST(MatmulForward, ConvertPathIsFloat32RoundedOnce) {
  Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (Transpose ta : {N, T}) {
      for (Transpose tb : {N, T}) {
        const Tensor a = normal(stored({3}, 32, 784, ta), 300).to(dtype);
        const Tensor b = normal(stored({}, 784, 10, tb), 301, 0.05).to(dtype);
        const Tensor low = matmul(a, b, ta, tb);
        const Tensor expected =
            matmul(a.to(DType::float32), b.to(DType::float32), ta, tb).to(dtype);
        const auto got = low.to_vector<double>(), want = expected.to_vector<double>();
        ASSERT_EQ(got.size(), want.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
        EXPECT_EQ(differ, 0u) << dtype_name(dtype);
      }
    }
  }
}

// matmul_bias adds the float32 bias to the float32 accumulator and rounds once: the float32
// product plus the bias, rounded (exactly so on the float32 path; within one bf16 rounding of it on
// the native one, whose summation order differs).
TEST(MatmulForward, BiasJoinsTheAccumulatorBeforeTheOneRounding) {
  const Tensor bias = normal({24}, 322, 4.0);
  for (auto path : {cpu::Bf16Path::when_available, cpu::Bf16Path::convert_to_float32}) {
    Bf16PathGuard guard(path);
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      for (Transpose ta : {N, T}) {
        const Tensor a = normal(stored({}, 40, 96, ta), 320).to(dtype);
        const Tensor b = normal(stored({}, 96, 24, N), 321, 0.1).to(dtype);
        const Tensor got = cpu::matmul_bias(a, b, ta, N, bias);
        ASSERT_EQ(got.dtype(), dtype);
        ASSERT_EQ(got.shape(), (Shape{40, 24}));
        const Tensor sum32 =
            add(cpu::matmul(a.to(DType::float32), b.to(DType::float32), ta, N), bias);
        const bool exact = dtype == DType::float16 || path == cpu::Bf16Path::convert_to_float32;
        const double rtol = dtype == DType::float32 ? 1e-5 : (exact ? 0.0 : std::ldexp(1.0, -7));
        EXPECT_TRUE(
            testing::all_close(got, sum32.to(dtype), {rtol, dtype == DType::float32 ? 1e-5 : 0.0}))
            << dtype_name(dtype) << (ta == T ? " transposed" : "");
      }
    }
  }
  // No inner extent: the bias in every row.
  const Tensor empty = cpu::matmul_bias(normal({3, 0}, 1), normal({0, 24}, 2), N, N, bias);
  EXPECT_TRUE(testing::all_close(empty, add(zeros({3, 24}), bias), {0, 0}));
  // The bias must be float32 (N).
  EXPECT_THROW(cpu::matmul_bias(normal({3, 4}, 1), normal({4, 5}, 2), N, N, normal({4}, 3)), Error);
  EXPECT_THROW(cpu::matmul_bias(normal({3, 4}, 1), normal({4, 5}, 2), N, N,
                                normal({5}, 3).to(DType::bfloat16)),
               Error);
}

TEST(MatmulForward, NativeAndConvertedBfloat16Agree) {
  const Tensor a = normal({64, 256}, 310).to(DType::bfloat16);
  const Tensor b = normal({256, 48}, 311, 1.0 / 16).to(DType::bfloat16);
  Tensor native, converted;
  {
    Bf16PathGuard guard(cpu::Bf16Path::when_available);
    native = matmul(a, b);
  }
  {
    Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
    converted = matmul(a, b);
  }
  EXPECT_TRUE(matches_reference(native, a, b));
  EXPECT_TRUE(matches_reference(converted, a, b));
  // Both are the float32-accumulated product rounded once: at most one bfloat16 ulp apart.
  EXPECT_TRUE(testing::all_close(native, converted, {std::ldexp(1.0, -7), 1e-30}));
}

// x^T . dy with a long inner extent and a small result (a filter gradient) runs as oneDNN's
// inner-product backward weights (matmul_long_inner.h): the same product, within the float32
// accumulation bound, in float32 and bfloat16 and with a float32 result of bfloat16 operands.
TEST(MatmulForward, LongInnerExtentFilterGradientMatchesReference) {
  struct Case {
    std::int64_t k, m, n;
  };
  const std::vector<Case> cases = {{32768, 32, 16}, {2048, 144, 40}, {5000, 7, 3}};
  std::uint64_t seed = 500;
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    for (const Case& c : cases) {
      const bool taken = cpu::takes_long_inner(dtype, c.m, c.n, c.k);
      if (dtype == DType::bfloat16 && !cpu::cpu_has_native_bf16()) {
        EXPECT_FALSE(taken);
      } else {
        EXPECT_TRUE(taken) << c.k;
      }
      const Tensor x = normal({c.k, c.m}, seed++).to(dtype);
      const Tensor dy = normal({c.k, c.n}, seed++, 1.0 / std::sqrt(double(c.k))).to(dtype);
      const Tensor dw = cpu::matmul(x, dy, T, N);
      EXPECT_EQ(dw.shape(), (Shape{c.m, c.n}));
      EXPECT_TRUE(matches_reference(dw, x, dy, T, N)) << dtype_name(dtype) << " K " << c.k;
      if (dtype == DType::bfloat16) {
        const Tensor wide = cpu::matmul(x, dy, T, N, DType::float32);
        EXPECT_EQ(wide.dtype(), DType::float32);
        EXPECT_EQ(wide.to(dtype).to_vector<double>(), dw.to_vector<double>());
        EXPECT_TRUE(matches_reference(wide.to(DType::float32), x.to(DType::float32),
                                      dy.to(DType::float32), T, N));
      }
    }
  }
  // Outside the range (a short K, a large result, float16): the matmul paths.
  EXPECT_FALSE(cpu::takes_long_inner(DType::float32, 32, 16, 2047));
  EXPECT_FALSE(cpu::takes_long_inner(DType::float32, 256, 256, 32768));
  EXPECT_FALSE(cpu::takes_long_inner(DType::float16, 32, 16, 32768));
  // Bad input is refused with a message, not computed.
  Tensor wrong = zeros({3, 16});
  EXPECT_THROW(cpu::long_inner_product(normal({4096, 32}, 1), normal({4096, 16}, 2), wrong), Error);
}

TEST(MatmulForward, EmptyOperands) {
  const Tensor zero_k = matmul(normal({3, 0}, 1), normal({0, 4}, 2));
  EXPECT_EQ(zero_k.shape(), (Shape{3, 4}));
  for (double v : zero_k.to_vector<double>()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(matmul(normal({0, 5}, 3), normal({5, 2}, 4)).shape(), (Shape{0, 2}));
  EXPECT_EQ(matmul(normal({0, 3, 5}, 5), normal({5, 2}, 6)).shape(), (Shape{0, 3, 2}));
  const Tensor h =
      matmul(normal({2, 0}, 7).to(DType::float16), normal({0, 3}, 8).to(DType::float16));
  for (double v : h.to_vector<double>()) EXPECT_EQ(v, 0.0);
}

// ---- gradients ----

TEST(MatmulGrad, Float64AllTransposes) {
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      const Tensor a = normal(stored({}, 3, 4, ta), 400, 1.0, DType::float64);
      const Tensor b = normal(stored({}, 4, 5, tb), 401, 1.0, DType::float64);
      EXPECT_TRUE(gradcheck(
          [=](const std::vector<Tensor>& x) { return matmul(x[0], x[1], ta, tb); }, {a, b}))
          << "ta=" << (ta == T) << " tb=" << (tb == T);
    }
  }
}

TEST(MatmulGrad, Float64Batched) {
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      const Tensor a = normal(stored({2}, 3, 4, ta), 410, 1.0, DType::float64);
      const Tensor b = normal(stored({2}, 4, 5, tb), 411, 1.0, DType::float64);
      EXPECT_TRUE(gradcheck(
          [=](const std::vector<Tensor>& x) { return matmul(x[0], x[1], ta, tb); }, {a, b}));
    }
  }
}

TEST(MatmulGrad, Float64BroadcastBatch) {
  struct Case {
    Shape a, b;
    Transpose ta, tb;
  };
  const std::vector<Case> cases = {
      {{2, 1, 3, 4}, {3, 4, 5}, N, N}, {{3, 4}, {2, 4, 5}, N, N}, {{2, 3, 4}, {4, 5}, N, N},
      {{2, 3, 4}, {5, 4}, N, T},       {{2, 4, 3}, {4, 5}, T, N}, {{2, 4, 3}, {1, 5, 4}, T, T},
      {{4, 3}, {2, 5, 4}, T, T},
  };
  std::uint64_t seed = 420;
  for (const Case& c : cases) {
    const Tensor a = normal(c.a, seed++, 1.0, DType::float64);
    const Tensor b = normal(c.b, seed++, 1.0, DType::float64);
    EXPECT_TRUE(gradcheck(
        [=](const std::vector<Tensor>& x) { return matmul(x[0], x[1], c.ta, c.tb); }, {a, b}))
        << c.a.to_string() << " x " << c.b.to_string();
  }
}

TEST(MatmulGrad, Float64ThroughViews) {
  const Tensor a = normal({4, 3}, 430, 1.0, DType::float64);
  const Tensor b = normal({4, 6}, 431, 1.0, DType::float64);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& x) {
        return matmul(x[0].transpose(0, 1), x[1].slice(1, 0, 6, 2));  // (3, 4) x (4, 3)
      },
      {a, b}));
  // The same tensor on both sides: both contributions reach it.
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[0], T, N); },
                        {normal({4, 3}, 432, 1.0, DType::float64)}));
}

TEST(MatmulGrad, GradientsHaveOperandDtypeAndOnlyWhereNeeded) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    Tensor a = normal({5, 7}, 440).to(dtype).detach();
    Tensor b = normal({7, 3}, 441).to(dtype).detach();
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    const auto grads = grad(sum(matmul(a, b)), {a, b});
    EXPECT_EQ(grads[0].dtype(), dtype);
    EXPECT_EQ(grads[1].dtype(), dtype);
    EXPECT_EQ(grads[0].shape(), a.shape());
    EXPECT_EQ(grads[1].shape(), b.shape());
  }
  // Only b requires a gradient: the backward computes dB only (dA would be undefined).
  Tensor x = normal({4, 6, 5}, 442);
  Tensor w = normal({5, 2}, 443);
  w.set_requires_grad(true);
  const Tensor loss = sum(matmul(x, w));
  const auto gw = grad(loss, {w});
  // d sum(x w) / dw = (sum over rows of x)^T 1: the column sums of x folded over its batch.
  const Tensor expected = cpu::matmul_reference(reshape(x, {24, 5}).to(DType::float64),
                                                ones({24, 2}, {.dtype = DType::float64}), T, N);
  EXPECT_TRUE(testing::all_close(gw[0], expected, {1e-5, 1e-5}));
}

// Larger float32 gradients against the reference products (the folded dB of a batched A included).
TEST(MatmulGrad, Float32MatchesReferenceProducts) {
  for (Transpose tb : {N, T}) {
    Tensor a = normal({3, 20, 30}, 450);
    Tensor b = normal(stored({}, 30, 16, tb), 451);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    const Tensor g = normal({3, 20, 16}, 452);
    const auto grads = grad(matmul(a, b, N, tb), {a, b}, g);
    // dA = g op(B)^T; dB = sum over the batch of A^T g (transposed when tb = yes).
    EXPECT_TRUE(matches_reference(grads[0], g, b.detach(), N, tb == T ? N : T));
    const Tensor a2 = reshape(a.detach(), {60, 30}), g2 = reshape(g, {60, 16});
    EXPECT_TRUE(tb == N ? matches_reference(grads[1], a2, g2, T, N)
                        : matches_reference(grads[1], g2, a2, T, N));
  }
}

// ---- 16-bit storage against float32 on the same rounded values (DESIGN §4 tolerances) ----

TEST(MatmulLowPrecision, Float16AndBfloat16VsFloat32) {
  struct Case {
    Shape a, b;
    Transpose ta, tb;
  };
  // Inputs scaled so that outputs are O(1) at any K (as with Glorot-initialised weights).
  const std::vector<Case> cases = {
      {{7, 13}, {13, 5}, N, N},     {{32, 784}, {784, 10}, N, N}, {{784, 32}, {784, 10}, T, N},
      {{32, 784}, {10, 784}, N, T}, {{784, 32}, {10, 784}, T, T}, {{4, 16, 64}, {4, 64, 8}, N, N},
      {{4, 16, 64}, {64, 8}, N, N}, {{16, 64}, {4, 8, 64}, N, T},
  };
  std::uint64_t seed = 500;
  for (cpu::Bf16Path path : {cpu::Bf16Path::when_available, cpu::Bf16Path::convert_to_float32}) {
    Bf16PathGuard guard(path);
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      for (const Case& c : cases) {
        const std::int64_t k = c.ta == T ? c.a[c.a.rank() - 2] : c.a[c.a.rank() - 1];
        const Tensor a = normal(c.a, seed++);
        const Tensor b = normal(c.b, seed++, 1.0 / std::sqrt(static_cast<double>(k)));
        EXPECT_TRUE(check_low_precision(
            [=](const std::vector<Tensor>& x) { return matmul(x[0], x[1], c.ta, c.tb); }, {a, b},
            dtype))
            << dtype_name(dtype) << " " << c.a.to_string() << " x " << c.b.to_string()
            << (path == cpu::Bf16Path::when_available ? " (native bf16 when available)"
                                                      : " (bf16 via float32)");
      }
    }
  }
}

// ---- errors ----

template <typename E, typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(MatmulErrors, InnerDimensionsNameBothShapes) {
  const std::string msg = error_of<ShapeError>([] { matmul(zeros({32, 784}), zeros({512, 10})); });
  EXPECT_NE(msg.find("matmul: inner dimensions do not match: (32, 784) x (512, 10)"),
            std::string::npos)
      << msg;
  // Shapes are reported after the transposes.
  const std::string t = error_of<ShapeError>([] {
    matmul(zeros({784, 32}), zeros({10, 512}), T, T);
  });
  EXPECT_NE(t.find("(32, 784) x (512, 10)"), std::string::npos) << t;
  EXPECT_NE(error_of<ShapeError>([] {
              matmul(zeros({2, 3, 4}), zeros({3, 5, 6}));
            }).find("matmul: inner dimensions do not match: (2, 3, 4) x (3, 5, 6)"),
            std::string::npos);
}

TEST(MatmulErrors, DtypeMismatchNamesBothDtypes) {
  const std::string msg = error_of<DTypeError>([] {
    matmul(zeros({2, 3}), zeros({3, 4}, {.dtype = DType::float16}));
  });
  EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  const std::string ints = error_of<DTypeError>([] {
    matmul(zeros({2, 3}, {.dtype = DType::int32}), zeros({3, 4}, {.dtype = DType::int32}));
  });
  EXPECT_NE(ints.find("int32"), std::string::npos) << ints;
}

TEST(MatmulErrors, RankOneAndBatchMismatch) {
  const std::string msg = error_of<ShapeError>([] { matmul(zeros({5}), zeros({5, 3})); });
  EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(5,)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
  EXPECT_NE(error_of<ShapeError>([] {
              matmul(zeros({2, 3}), zeros({3}));
            }).find("rank"),
            std::string::npos);
  const std::string batch = error_of<ShapeError>([] {
    matmul(zeros({2, 3, 4}), zeros({5, 4, 6}));
  });
  EXPECT_NE(batch.find("(2, 3, 4) x (5, 4, 6)"), std::string::npos) << batch;
  EXPECT_NE(batch.find("batch"), std::string::npos) << batch;
}

// ---- the oneDNN context ----

TEST(MatmulCache, SecondCallWithTheSameShapeReusesThePrimitive) {
  const Tensor a = normal({37, 41}, 600), b = normal({41, 43}, 601);
  cpu::clear_matmul_cache();  // the shape may be cached by an earlier run of this test
  const auto before = cpu::matmul_cache_stats();
  EXPECT_EQ(before.size, 0u);
  const Tensor first = matmul(a, b);
  const auto after_first = cpu::matmul_cache_stats();
  EXPECT_EQ(after_first.misses, before.misses + 1);
  const Tensor second = matmul(normal({37, 41}, 602), normal({41, 43}, 603));
  const auto after_second = cpu::matmul_cache_stats();
  EXPECT_EQ(after_second.misses, after_first.misses);
  EXPECT_EQ(after_second.hits, after_first.hits + 1);
  EXPECT_EQ(after_second.size, after_first.size);
  // A different transpose (another stride pattern) is another primitive.
  matmul(a, normal({43, 41}, 604), N, T);
  EXPECT_EQ(cpu::matmul_cache_stats().misses, after_second.misses + 1);
  // Clearing empties the cache; the next call compiles again.
  cpu::clear_matmul_cache();
  EXPECT_EQ(cpu::matmul_cache_stats().size, 0u);
  matmul(a, b);
  EXPECT_EQ(cpu::matmul_cache_stats().size, 1u);
}

TEST(MatmulCache, NoLayoutReachesTheReferenceKernel) {
  // Every layout the matmul hands to oneDNN has a fast kernel (brgemm / jit gemm).
  cpu::clear_matmul_cache();
  const std::int64_t before = cpu::matmul_cache_stats().reference_implementations;
  const Tensor base = normal({24, 40}, 610);
  matmul(base.slice(1, 0, 40, 2), normal({20, 3}, 611));
  matmul(base.transpose(0, 1).slice(0, 2, 30), normal({24, 3}, 612));  // column-major, padded
  matmul(normal({6, 10, 4}, 613).permute({2, 0, 1}), normal({4, 10, 3}, 614));
  for (Transpose ta : {N, T}) {
    for (Transpose tb : {N, T}) {
      for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
        matmul(normal(stored({3}, 9, 11, ta), 615).to(dtype),
               normal(stored({}, 11, 6, tb), 616).to(dtype), ta, tb);
      }
    }
  }
  EXPECT_EQ(cpu::matmul_cache_stats().reference_implementations, before);
  // Control: a layout with no unit stride, handed to oneDNN directly, is counted.
  using dt = dnnl::memory::data_type;
  cpu::MatmulGeometry odd;
  odd.src = {{6, 8}, {16, 2}, dt::f32};
  odd.weights = {{8, 3}, {3, 1}, dt::f32};
  odd.dst = {{6, 3}, {3, 1}, dt::f32};
  const auto primitive = cpu::matmul_primitive(odd);
  EXPECT_EQ(primitive->implementation.rfind("ref", 0), 0u) << primitive->implementation;
  EXPECT_EQ(cpu::matmul_cache_stats().reference_implementations, before + 1);
}

TEST(MatmulCache, ConcurrentCallsAgree) {
  const Tensor a = normal({96, 80}, 620), b = normal({80, 72}, 621);
  const auto expected = matmul(a, b).to_vector<float>();
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) results[t] = matmul(a, b).to_vector<float>();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(MatmulCache, ScratchIsNotLiveBetweenCallsAndComesFromTheBlockCache) {
  const Tensor a = normal({64, 96}, 630).to(DType::float16);
  const Tensor b = normal({96, 32}, 631).to(DType::float16);
  cpu::release_matmul_scratch();  // nothing is kept any more: a no-op (it once freed kept blocks)
  const std::int64_t before = memory_stats().current_bytes;
  Tensor c = matmul(a, b);
  // Only the result stays live: the float32 copies of both operands and the float32 result went
  // back to the allocator's cache (they once stayed live per thread, and counted in the peak).
  EXPECT_EQ(memory_stats().current_bytes - before, static_cast<std::int64_t>(c.nbytes()));
  // A second call takes the same blocks from the cache and gives them back: the cache holds no
  // more than before (less the result's block, when that came from the cache too).
  const std::int64_t cached = static_cast<std::int64_t>(core::cpu_cached_bytes());
  Tensor d = matmul(a, b);
  EXPECT_LE(static_cast<std::int64_t>(core::cpu_cached_bytes()), cached);
  EXPECT_EQ(memory_stats().current_bytes - before,
            static_cast<std::int64_t>(c.nbytes() + d.nbytes()));
}

TEST(MatmulCache, NativeBf16OnlyWhereTheCpuHasIt) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string text((std::istreambuf_iterator<char>(cpuinfo)),
                         std::istreambuf_iterator<char>());
  if (!text.empty() && text.find("avx512_bf16") == std::string::npos &&
      text.find("amx_bf16") == std::string::npos) {
    EXPECT_FALSE(cpu::cpu_has_native_bf16());
  }
  Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
  EXPECT_FALSE(cpu::use_native_bf16());
}

}  // namespace
}  // namespace mixprec
