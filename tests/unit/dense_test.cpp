// Dense: forward values against loops over the layer's own weights (in double), gradients under
// mixed_float16 reaching the float32 variables in float32, mixed-vs-float32 parity (DESIGN §4:
// 2e-3), options (activation, use_bias, initializers) and error messages.
#include "mixprec/layers/dense.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;
using testing::all_close;

using testing::PolicyGuard;

using testing::expect_error;

// A (1, n) float32 row.
Tensor values_of(const std::vector<double>& v) {
  return from_vector(v, {1, static_cast<std::int64_t>(v.size())});
}

// y = act(x W + b) for x (rows, in), W (in, units), in double.
std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& b, std::int64_t rows, std::int64_t in,
                              std::int64_t units, const std::string& act) {
  std::vector<double> y(static_cast<std::size_t>(rows * units));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t u = 0; u < units; ++u) {
      double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(u)];
      for (std::int64_t i = 0; i < in; ++i) {
        acc += x[static_cast<std::size_t>(r * in + i)] * w[static_cast<std::size_t>(i * units + u)];
      }
      if (act == "relu") acc = std::max(acc, 0.0);
      if (act == "tanh") acc = std::tanh(acc);
      y[static_cast<std::size_t>(r * units + u)] = acc;
    }
  }
  return y;
}

TEST(DenseTest, ForwardMatchesLoopsFloat32) {
  set_seed(11);
  layers::Dense d(3, {.activation = "relu", .bias_initializer = "random_normal"});
  const Tensor x = random_normal({4, 5});
  const Tensor y = d(x);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  const auto w = d.get_weights();
  const auto expected = reference(x.to_vector<double>(), w[0].to_vector<double>(),
                                  w[1].to_vector<double>(), 4, 5, 3, "relu");
  EXPECT_TRUE(all_close(y, from_vector(expected, {4, 3}), {1e-5, 1e-6}));
}

TEST(DenseTest, ForwardMatchesLoopsFloat64WithoutBias) {
  layers::Dense d(4, {.activation = "tanh", .use_bias = false, .dtype = "float64"});
  const Tensor x = random_normal({3, 6}, 0, 1, {.dtype = kFloat64});
  const Tensor y = d(x);
  EXPECT_EQ(y.dtype(), kFloat64);
  ASSERT_EQ(d.variables().size(), 1u);
  EXPECT_FALSE(d.bias().defined());
  EXPECT_FALSE(d.use_bias());
  const auto expected =
      reference(x.to_vector<double>(), d.kernel().to_vector<double>(), {}, 3, 6, 4, "tanh");
  EXPECT_TRUE(all_close(y, from_vector(expected, {3, 4}, {.dtype = kFloat64}), {1e-12, 1e-12}));
}

TEST(DenseTest, AppliesToTheLastAxisOfHigherRankInputs) {
  layers::Dense d(2, {.bias_initializer = "ones"});
  const Tensor x = random_uniform({2, 3, 4}, -1, 1);
  const Tensor y = d(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  const auto expected = reference(x.to_vector<double>(), d.kernel().to_vector<double>(),
                                  d.bias().to_vector<double>(), 6, 4, 2, "");
  EXPECT_TRUE(all_close(y, from_vector(expected, {2, 3, 2}), {1e-5, 1e-6}));
}

TEST(DenseTest, DefaultInitializersAreGlorotUniformAndZeros) {
  layers::Dense d(64);
  d(Input({32}));
  const double limit = std::sqrt(6.0 / (32 + 64));
  const auto k = d.kernel().to_vector<double>();
  double lo = 1, hi = -1;
  for (double v : k) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -limit);
  EXPECT_LE(hi, limit);
  EXPECT_LT(lo, -0.8 * limit);  // 2048 draws fill the interval
  EXPECT_GT(hi, 0.8 * limit);
  for (double v : d.bias().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(DenseTest, InitializerOptionsByNameAndCustom) {
  layers::Dense named(2, {.kernel_initializer = "ones", .bias_initializer = "ones"});
  EXPECT_EQ(named(values_of({1, 2, 3})).to_vector<double>(), (std::vector<double>{7, 7}));
  initializers::Initializer twos(
      "twos", [](const Shape& s, DType d, Generator&) { return full(s, 2.0, {.dtype = d}); });
  layers::Dense custom(1, {.kernel_initializer = twos});
  EXPECT_EQ(custom(values_of({1, 2, 3})).to_vector<double>(), (std::vector<double>{12}));
}

TEST(DenseTest, GradientsReachFloat32VariablesInFloat32UnderMixed) {
  PolicyGuard guard("mixed_float16");
  layers::Dense d(3);
  // Values exact in float16, so the expected gradients are exact.
  const std::vector<double> xv = {0.5, -1, 2, 0.25, 1.5, -0.75, 3, 1, -2, 0.125};
  const Tensor x = from_vector(xv, {2, 5});
  const Tensor y = d(x);
  ASSERT_EQ(y.dtype(), kFloat16);
  ASSERT_EQ(d.kernel().dtype(), kFloat32);
  const auto g = grad(sum(y.to(kFloat32)), {d.kernel(), d.bias()});
  ASSERT_EQ(g[0].dtype(), kFloat32);
  ASSERT_EQ(g[1].dtype(), kFloat32);
  // d sum(y) / dW[i][u] = sum over rows of x[r][i]; d sum(y) / db[u] = rows.
  std::vector<double> gk;
  for (int i = 0; i < 5; ++i) {
    for (int u = 0; u < 3; ++u) gk.push_back(xv[i] + xv[5 + i]);
  }
  EXPECT_EQ(g[0].to_vector<double>(), gk);
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(DenseTest, MixedFloat16MatchesFloat32Within2e3) {
  set_seed(5);
  layers::Dense f32(32, {.activation = "relu", .dtype = "float32"});
  layers::Dense mixed(32, {.activation = "relu", .dtype = "mixed_float16"});
  const Tensor x = random_normal({16, 64});
  f32(x);
  mixed(x);
  mixed.set_weights(f32.get_weights());
  const Tensor a = f32(x);
  const Tensor b = mixed(x);
  ASSERT_EQ(b.dtype(), kFloat16);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0, scale = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += av[i] * av[i];
    scale = std::max(scale, std::abs(av[i]));
  }
  EXPECT_LE(std::sqrt(err / norm), 2e-3);
  EXPECT_TRUE(all_close(b, a, {2e-3, 2e-3 * scale}));
}

TEST(DenseTest, RankOneInputExplainsTheFix) {
  layers::Dense d(3);
  expect_error<ShapeError>([&] { d(zeros({784})); },
                           {"Dense expects a rank-2 (or higher) input", "got shape (784,)",
                            "add a batch axis or Flatten first"});
  expect_error<ShapeError>([&] { d(Input({})); }, {"rank-2", "(None,)"});
}

TEST(DenseTest, IntegerInputIsADTypeError) {
  layers::Dense d(3);
  expect_error<DTypeError>(
      [&] {
        d(from_vector(std::vector<std::int32_t>{1, 2}, {1, 2}));
      },
      {"floating", "int32"});
  expect_error<DTypeError>([] { layers::Dense(3)(Input({2}, {.dtype = kUInt8})); }, {"uint8"});
}

TEST(DenseTest, BadOptionsAreRejectedAtConstruction) {
  expect_error<ValueError>([] { layers::Dense(0); }, {"positive", "got 0"});
  expect_error<ValueError>([] { layers::Dense(2, {.activation = "relux"}); },
                           {"relux", "relu", "softmax", "gelu"});
  expect_error<ValueError>([] { layers::Dense(2, {.kernel_initializer = "glorot"}); },
                           {"glorot", "glorot_uniform", "he_normal"});
}

TEST(DenseTest, KernelBeforeBuildIsAnError) {
  layers::Dense d(3, {.name = "unbuilt"});
  expect_error<ValueError>([&] { d.kernel(); }, {"unbuilt", "built"});
  EXPECT_THROW(layers::Dense(layers::Flatten()), ValueError);
}

}  // namespace
}  // namespace mixprec
