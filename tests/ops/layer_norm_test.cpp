// layer_norm / rms_norm: forward and backward against a long-double reference written here,
// float64 finite-difference gradients (with and without gamma/beta), 16-bit against float32
// (DESIGN §4) including the mixed case (16-bit x, float32 parameters), a large mean (1e4 + small
// noise) that E[x^2] - E[x]^2 would destroy, parameter gradients identical for 1 and 2 threads,
// and error messages.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/transformer_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::check_low_precision;
using testing::expect_error;
using testing::gradcheck;
using testing::normal;

enum class Kind { layer, rms };

Tensor run(Kind kind, const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  return kind == Kind::layer ? layer_norm(x, gamma, beta, eps) : rms_norm(x, gamma, eps);
}

// y per row in long double over the stored values.
std::vector<double> reference(Kind kind, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              double eps) {
  const auto xv = x.to_vector<double>();
  const std::int64_t c = x.dim(-1), m = x.numel() / c;
  const auto g = gamma.defined() ? gamma.to_vector<double>() : std::vector<double>(c, 1.0);
  const auto b = beta.defined() ? beta.to_vector<double>() : std::vector<double>(c, 0.0);
  std::vector<double> y(xv.size());
  for (std::int64_t i = 0; i < m; ++i) {
    long double mu = 0, q = 0;
    if (kind == Kind::layer) {
      for (std::int64_t j = 0; j < c; ++j) mu += xv[i * c + j];
      mu /= c;
    }
    for (std::int64_t j = 0; j < c; ++j) q += (xv[i * c + j] - mu) * (xv[i * c + j] - mu);
    const long double inv = 1.0L / std::sqrt(q / c + eps);
    for (std::int64_t j = 0; j < c; ++j) {
      const long double v = (xv[i * c + j] - mu) * inv * g[j] + (kind == Kind::layer ? b[j] : 0);
      y[i * c + j] = static_cast<double>(v);
    }
  }
  return y;
}

class RowNormKinds : public ::testing::TestWithParam<Kind> {};

TEST_P(RowNormKinds, ForwardMatchesReference) {
  const Kind kind = GetParam();
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 7}, Shape{4, 1}, Shape{2, 300}}) {
    for (DType dtype : {DType::float32, DType::float64}) {
      const Tensor x = normal(shape, 1, 0.5, 2.0, dtype);
      const Tensor gamma = normal(Shape{shape[shape.rank() - 1]}, 2, 1.0, 0.5, dtype);
      const Tensor beta = normal(Shape{shape[shape.rank() - 1]}, 3, 0.0, 0.5, dtype);
      const Tensor y = run(kind, x, gamma, beta, 1e-3);
      EXPECT_EQ(y.dtype(), dtype);
      EXPECT_EQ(y.shape(), shape);
      const Tensor ref =
          from_vector(reference(kind, x, gamma, beta, 1e-3), shape, {.dtype = DType::float64});
      EXPECT_TRUE(all_close(y, ref, testing::tolerance_for(dtype)))
          << shape.to_string() << " " << dtype_name(dtype);
      // No scale / no center.
      const Tensor y0 = run(kind, x, Tensor(), Tensor(), 1e-3);
      const Tensor ref0 = from_vector(reference(kind, x, Tensor(), Tensor(), 1e-3), shape,
                                      {.dtype = DType::float64});
      EXPECT_TRUE(all_close(y0, ref0, testing::tolerance_for(dtype))) << shape.to_string();
    }
  }
}

TEST_P(RowNormKinds, GradcheckFloat64) {
  const Kind kind = GetParam();
  const Tensor x = normal(Shape{3, 2, 6}, 4, 0.3, 1.5, DType::float64);
  const Tensor gamma = normal(Shape{6}, 5, 1.0, 0.5, DType::float64);
  const Tensor beta = normal(Shape{6}, 6, 0.0, 0.5, DType::float64);
  if (kind == Kind::layer) {
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-3); },
        {x, gamma, beta}));
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), 1e-3); },
        {x, gamma}));
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), in[1], 1e-3); },
        {x, beta}));
  } else {
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); }, {x, gamma}));
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) { return rms_norm(in[0], Tensor(), 1e-6); }, {x}));
  }
}

TEST_P(RowNormKinds, SixteenBitAgainstFloat32) {
  const Kind kind = GetParam();
  const Tensor x = normal(Shape{4, 3, 24}, 7, 0.5, 1.0);
  const Tensor gamma = normal(Shape{24}, 8, 1.0, 0.3);
  const Tensor beta = normal(Shape{24}, 9, 0.0, 0.3);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    // Every operand in the 16-bit dtype.
    EXPECT_TRUE(check_low_precision(
        [kind](const std::vector<Tensor>& in) { return run(kind, in[0], in[1], in[2], 1e-3); },
        {x, gamma, beta}, dtype))
        << dtype_name(dtype);
    // The mixed case: 16-bit x, float32 parameters; y against float32 on the same rounded x.
    const Tensor x16 = x.to(dtype);
    const Tensor y = run(kind, x16, gamma, beta, 1e-3);
    EXPECT_EQ(y.dtype(), dtype);
    const Tensor y32 = run(kind, x16.to(DType::float32), gamma, beta, 1e-3);
    EXPECT_TRUE(all_close(y, y32, testing::tolerance_for(dtype))) << dtype_name(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(LayerNorm, RowNormKinds, ::testing::Values(Kind::layer, Kind::rms),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(info.param == Kind::layer ? "layer" : "rms");
                         });

TEST(LayerNorm, LargeMeanKeepsPrecision) {
  // x = 1e4 + noise of std 0.1: E[x^2] - E[x]^2 in float32 loses everything (1e8 with a 2^-24
  // relative error is ~6, against a variance of 0.01: y off by O(1) or NaN); the two-pass
  // statistics keep y within the one rounding of the float32 mean, half an ulp of 1e4 (2^-11)
  // divided by the std (0.1): 4.9e-3, plus a few float32 ulps.
  Tensor x = normal(Shape{8, 64}, 10, 1e4, 0.1);
  const Tensor y = layer_norm(x, Tensor(), Tensor(), 1e-6);
  const Tensor ref = from_vector(reference(Kind::layer, x, Tensor(), Tensor(), 1e-6), x.shape(),
                                 {.dtype = DType::float64});
  EXPECT_TRUE(all_close(y, ref, {1e-4, 5.5e-3}));
  // Each row is normalized: mean 0, variance 1 (up to epsilon).
  const auto v = y.to_vector<double>();
  for (int i = 0; i < 8; ++i) {
    double s = 0, q = 0;
    for (int j = 0; j < 64; ++j) s += v[i * 64 + j];
    for (int j = 0; j < 64; ++j) q += v[i * 64 + j] * v[i * 64 + j];
    EXPECT_NEAR(s / 64, 0.0, 5.5e-3);
    EXPECT_NEAR(q / 64, 1.0, 2e-2);
  }
}

TEST(LayerNorm, BackwardMatchesReferenceAndParameterDtypes) {
  // A 16-bit x with float32 parameters: dgamma and dbeta arrive in float32, dx in x's dtype.
  const Tensor x = normal(Shape{5, 16}, 11).to(DType::bfloat16);
  Tensor gamma = normal(Shape{16}, 12, 1.0, 0.2);
  Tensor beta = normal(Shape{16}, 13, 0.0, 0.2);
  Tensor xv = x.detach();
  xv.set_requires_grad(true);
  gamma.set_requires_grad(true);
  beta.set_requires_grad(true);
  const Tensor y = layer_norm(xv, gamma, beta, 1e-3);
  sum(y.to(DType::float32) * y.to(DType::float32)).backward();
  EXPECT_EQ(xv.grad().dtype(), DType::bfloat16);
  EXPECT_EQ(gamma.grad().dtype(), DType::float32);
  EXPECT_EQ(beta.grad().dtype(), DType::float32);
  // dbeta = sum over rows of dy = 2 y.
  const auto yv = y.to_vector<double>();
  const auto db = beta.grad().to_vector<double>();
  for (int j = 0; j < 16; ++j) {
    double s = 0;
    for (int i = 0; i < 5; ++i) s += 2 * yv[i * 16 + j];
    EXPECT_NEAR(db[j], s, 1e-4 * (1 + std::abs(s)));
  }
}

TEST(LayerNorm, ParameterGradientsIndependentOfThreadCount) {
  // 600 x 96 elements: above the parallel threshold, several fixed blocks of rows.
  const Tensor x = normal(Shape{600, 96}, 14, 0.2, 1.0);
  const Tensor gamma = normal(Shape{96}, 15, 1.0, 0.2);
  const Tensor beta = normal(Shape{96}, 16, 0.0, 0.2);
  const Tensor w = normal(Shape{600, 96}, 17);
  auto grads = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor xs = x.detach(), g = gamma.detach(), b = beta.detach();
    xs.set_requires_grad(true);
    g.set_requires_grad(true);
    b.set_requires_grad(true);
    sum(layer_norm(xs, g, b, 1e-3) * w).backward();
    omp_set_num_threads(before);
    return std::vector<std::vector<float>>{
        xs.grad().to_vector<float>(), g.grad().to_vector<float>(), b.grad().to_vector<float>()};
  };
  EXPECT_EQ(grads(1), grads(2));
}

TEST(LayerNorm, Errors) {
  const Tensor x = normal(Shape{2, 4}, 18);
  expect_error<ShapeError>([&] { layer_norm(x, ones(Shape{3}), Tensor()); },
                           {"layer_norm", "gamma", "(4,)", "(3,)"});
  expect_error<DTypeError>(
      [&] { layer_norm(x, ones(Shape{4}, {.dtype = DType::float16}), Tensor()); },
      {"layer_norm", "gamma", "float32", "float16"});
  expect_error<DTypeError>(
      [&] { layer_norm(x.to(DType::float16), Tensor(), ones(Shape{4}, {.dtype = kFloat64})); },
      {"beta", "float64"});
  expect_error<ValueError>([&] { layer_norm(x, Tensor(), Tensor(), 0.0); },
                           {"epsilon", "positive"});
  expect_error<ValueError>([&] { rms_norm(x, Tensor(), -1.0); }, {"rms_norm", "epsilon"});
  expect_error<DTypeError>([&] { rms_norm(x.to(DType::int32), Tensor()); }, {"rms_norm", "int32"});
  expect_error<ShapeError>(
      [&] {
        layer_norm(zeros(Shape{2, 0}), Tensor(), Tensor());
      },
      {"layer_norm", "(2, 0)"});
}

TEST(LayerNorm, EmptyBatch) {
  Tensor x = zeros(Shape{0, 4});
  Tensor gamma = ones(Shape{4});
  x.set_requires_grad(true);
  gamma.set_requires_grad(true);
  const Tensor y = layer_norm(x, gamma, Tensor());
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  sum(y).backward();
  EXPECT_EQ(gamma.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace mixprec
