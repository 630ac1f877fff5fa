// Losses against the Keras formulas evaluated here in double (long double log-sum-exp for logits),
// extreme inputs (no Inf/NaN), the float32 island, finite-difference gradients in float64, and
// argument errors.
#include "mixprec/losses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::gradcheck;

constexpr double kEps = 1e-7;

Tensor mat(const std::vector<double>& v, std::int64_t rows, std::int64_t cols,
           DType dtype = kFloat32) {
  return from_vector(v, {rows, cols}, {.dtype = dtype});
}
Tensor vec(const std::vector<double>& v, DType dtype = kFloat32) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = dtype});
}
Tensor labels(const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// Keras clips in the compute dtype: float32's 1 - 1e-7 is 1 - 2^-23 (its nearest value), which
// changes -log(1 - p) at p = 1 from 16.12 to 15.94.
double clip(double p) {
  return std::min(std::max(p, static_cast<double>(static_cast<float>(kEps))),
                  static_cast<double>(static_cast<float>(1.0 - kEps)));
}

// Keras categorical crossentropy on probabilities: normalise each row, clip, -sum t log p.
double cce_probabilities(const std::vector<double>& p, const std::vector<double>& t, int rows,
                         int cols) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += p[r * cols + c];
    for (int c = 0; c < cols; ++c) total -= t[r * cols + c] * std::log(clip(p[r * cols + c] / s));
  }
  return total / rows;
}

// From logits: -sum t (x - logsumexp(x)), in long double.
double cce_logits(const std::vector<double>& x, const std::vector<double>& t, int rows, int cols) {
  long double total = 0;
  for (int r = 0; r < rows; ++r) {
    long double m = x[r * cols];
    for (int c = 1; c < cols; ++c) m = std::max<long double>(m, x[r * cols + c]);
    long double s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(static_cast<long double>(x[r * cols + c]) - m);
    const long double lse = m + std::log(s);
    for (int c = 0; c < cols; ++c) total -= t[r * cols + c] * (x[r * cols + c] - lse);
  }
  return static_cast<double>(total / rows);
}

std::vector<double> one_hot_of(const std::vector<std::int64_t>& y, int cols) {
  std::vector<double> t(y.size() * cols, 0.0);
  for (std::size_t r = 0; r < y.size(); ++r) t[r * cols + static_cast<std::size_t>(y[r])] = 1.0;
  return t;
}

void expect_loss(const Tensor& loss, double expected, double rtol = 2e-6) {
  EXPECT_EQ(loss.rank(), 0);
  EXPECT_EQ(loss.dtype(), kFloat32);
  EXPECT_TRUE(std::isfinite(loss.item()));
  EXPECT_NEAR(loss.item(), expected, rtol * std::max(1.0, std::abs(expected)));
}

// ---- sparse categorical crossentropy ----

const std::vector<double> kProbabilities = {0.2, 0.5, 0.3, 0.0,   // a zero probability
                                            0.1, 0.1, 0.1, 0.7,   //
                                            0.3, 0.3, 0.3, 0.3};  // rows need not sum to 1
const std::vector<std::int64_t> kLabels = {3, 3, 1};
const std::vector<double> kLogits = {2.0, -1.0, 0.5, 3.0, -4.0, 0.0, 1.5, 2.5, 0.1, 0.2, 0.3, -0.4};

TEST(LossesTest, SparseCategoricalCrossentropyOnProbabilities) {
  const losses::SparseCategoricalCrossentropy loss;
  EXPECT_EQ(loss.name(), "sparse_categorical_crossentropy");
  // Row 0's true class has probability 0: clipped to 1e-7, -log = 16.118.
  expect_loss(loss(labels(kLabels), mat(kProbabilities, 3, 4)),
              cce_probabilities(kProbabilities, one_hot_of(kLabels, 4), 3, 4));
}

TEST(LossesTest, SparseCategoricalCrossentropyFromLogits) {
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true});
  expect_loss(loss(labels(kLabels), mat(kLogits, 3, 4)),
              cce_logits(kLogits, one_hot_of(kLabels, 4), 3, 4));
}

TEST(LossesTest, SparseLabelsMayBeInt32Uint8OrColumnShaped) {
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true});
  const double expected = cce_logits(kLogits, one_hot_of(kLabels, 4), 3, 4);
  const Tensor x = mat(kLogits, 3, 4);
  expect_loss(loss(from_vector(std::vector<std::int32_t>{3, 3, 1}, {3}), x), expected);
  expect_loss(loss(labels(kLabels).to(kUInt8), x), expected);
  expect_loss(loss(labels(kLabels).reshape({3, 1}), x), expected);
}

TEST(LossesTest, SparseCategoricalCrossentropyExtremeLogitsStayFinite) {
  const std::vector<double> x = {1e4, -1e4, 0.0, 30000.0, -30000.0, 1.0};
  const std::vector<std::int64_t> y = {1, 1};  // the least likely classes: loss ~ 2e4 and 6e4
  const Tensor logits = mat(x, 2, 3);
  expect_loss(losses::SparseCategoricalCrossentropy({.from_logits = true})(labels(y), logits),
              cce_logits(x, one_hot_of(y, 3), 2, 3));
  Tensor leaf = logits.detach();
  leaf.set_requires_grad(true);
  const Tensor l = losses::SparseCategoricalCrossentropy({.from_logits = true})(labels(y), leaf);
  const Tensor g = grad(l, {leaf})[0];
  EXPECT_TRUE(all_finite(g));
  // d/dx = (softmax(x) - onehot) / N: here softmax is one-hot on the largest logit.
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0.5, -0.5, 0.0, 0.5, -0.5, 0.0}));
}

TEST(LossesTest, SparseLabelErrors) {
  const losses::SparseCategoricalCrossentropy loss;
  const Tensor p = mat(kProbabilities, 3, 4);
  try {
    loss(labels({3, 4, 1}), p);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("label 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(loss(labels({3, -1, 1}), p), ValueError);
  EXPECT_THROW(loss(vec({3, 3, 1}), p), DTypeError);  // float labels: use CategoricalCrossentropy
  try {
    loss(labels({3, 3}), p);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("(2,)"), std::string::npos) << message;
    EXPECT_NE(message.find("(3, 4)"), std::string::npos) << message;
  }
  EXPECT_THROW(loss(labels(kLabels), labels({1, 2, 3})), DTypeError);  // integer y_pred
}

// ---- categorical crossentropy ----

TEST(LossesTest, CategoricalCrossentropyOnProbabilitiesWithSoftTargets) {
  const std::vector<double> t = {0.1, 0.2, 0.3, 0.4, 0, 0, 0, 1, 0.5, 0.5, 0, 0};
  expect_loss(losses::CategoricalCrossentropy()(mat(t, 3, 4), mat(kProbabilities, 3, 4)),
              cce_probabilities(kProbabilities, t, 3, 4));
}

TEST(LossesTest, CategoricalCrossentropyFromLogits) {
  const std::vector<double> t = one_hot_of(kLabels, 4);
  expect_loss(
      losses::CategoricalCrossentropy({.from_logits = true})(mat(t, 3, 4), mat(kLogits, 3, 4)),
      cce_logits(kLogits, t, 3, 4));
  EXPECT_THROW(losses::CategoricalCrossentropy()(mat(t, 4, 3), mat(kLogits, 3, 4)), ShapeError);
}

// ---- binary crossentropy ----

// Keras: -(t log p + (1 - t) log(1 - p)) with p clipped; from logits the stable
// max(x, 0) - x t + log1p(exp(-|x|)).
double bce(const std::vector<double>& p, const std::vector<double>& t, bool logits) {
  double total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (logits) {
      total += std::max(p[i], 0.0) - p[i] * t[i] + std::log1p(std::exp(-std::abs(p[i])));
    } else {
      const double q = clip(p[i]);
      total -= t[i] * std::log(q) + (1 - t[i]) * std::log(1 - q);
    }
  }
  return total / static_cast<double>(p.size());
}

TEST(LossesTest, BinaryCrossentropyOnProbabilitiesIncludingZeroAndOne) {
  const std::vector<double> p = {0.9, 0.2, 0.0, 1.0, 0.5, 0.7};
  const std::vector<double> t = {1, 0, 1, 0, 1, 0.25};
  expect_loss(losses::BinaryCrossentropy()(mat(t, 3, 2), mat(p, 3, 2)), bce(p, t, false), 1e-5);
}

TEST(LossesTest, BinaryCrossentropyFromLogitsIncludingExtremes) {
  const std::vector<double> x = {0.0, 2.0, -3.0, 100.0, -100.0, 1e4, -1e4, 0.5};
  const std::vector<double> t = {1, 0, 1, 1, 1, 0, 0, 0.3};
  expect_loss(losses::BinaryCrossentropy({.from_logits = true})(vec(t), vec(x)), bce(x, t, true));
}

TEST(LossesTest, BinaryCrossentropyFromLogitsGradientIsSigmoidMinusTarget) {
  // Includes x = 0, where kinked formulations get the subgradient wrong.
  const std::vector<double> x = {0.0, 1.5, -2.0, 50.0};
  const std::vector<double> t = {1, 0, 0.5, 0};
  Tensor leaf = vec(x);
  leaf.set_requires_grad(true);
  const Tensor l = losses::BinaryCrossentropy({.from_logits = true})(vec(t), leaf);
  const auto g = grad(l, {leaf})[0].to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double expected = (1.0 / (1.0 + std::exp(-x[i])) - t[i]) / 4.0;
    EXPECT_NEAR(g[i], expected, 1e-7) << i;
  }
}

TEST(LossesTest, BinaryTargetsMayDropOrAddATrailingAxis) {
  const std::vector<double> p = {0.9, 0.2, 0.6};
  const std::vector<double> t = {1, 0, 1};
  const double expected = bce(p, t, false);
  expect_loss(losses::BinaryCrossentropy()(vec(t), mat(p, 3, 1)), expected);
  expect_loss(losses::BinaryCrossentropy()(mat(t, 3, 1), vec(p)), expected);
  expect_loss(losses::BinaryCrossentropy()(labels({1, 0, 1}), vec(p)),
              expected);  // integer targets
  EXPECT_THROW(losses::BinaryCrossentropy()(mat(t, 1, 3), vec(p)), ShapeError);
}

// ---- mean squared error ----

TEST(LossesTest, MeanSquaredError) {
  const std::vector<double> p = {1.0, 2.5, -1.0, 0.0};
  const std::vector<double> t = {0.5, 2.5, 1.0, -3.0};
  const double expected = (0.25 + 0.0 + 4.0 + 9.0) / 4.0;
  expect_loss(losses::MeanSquaredError()(vec(t), vec(p)), expected);
  expect_loss(losses::MeanSquaredError()(mat(t, 4, 1), vec(p)), expected);
  EXPECT_EQ(losses::MeanSquaredError().name(), "mean_squared_error");
  EXPECT_THROW(losses::MeanSquaredError()(vec({1, 2, 3}), vec(p)), ShapeError);
}

// ---- the float32 island ----

TEST(LossesTest, HalfPrecisionPredictionsAreComputedInFloat32) {
  // float16 logits are upcast first: the result is the float32 loss of the same values.
  const Tensor x16 = mat(kLogits, 3, 4).to(kFloat16);
  const Tensor x32 = x16.to(kFloat32);
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true});
  const Tensor a = loss(labels(kLabels), x16);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.item(), loss(labels(kLabels), x32).item());
  // In float16 the squares themselves would overflow (300^2 = 90000 > 65504).
  const Tensor big = vec({300.0, -300.0, 300.0, -300.0}).to(kFloat16);
  const Tensor mse = losses::MeanSquaredError()(zeros({4}), big);
  EXPECT_EQ(mse.dtype(), kFloat32);
  EXPECT_EQ(mse.item(), 90000.0);
  EXPECT_EQ(losses::BinaryCrossentropy()(vec({1, 0}), vec({0.5, 0.5}).to(kBFloat16)).dtype(),
            kFloat32);
}

// ---- gradients (finite differences in float64) ----

TEST(LossesTest, GradientsMatchFiniteDifferences) {
  const Tensor p =
      mat({0.2, 0.5, 0.3, 0.15, 0.1, 0.1, 0.15, 0.7, 0.3, 0.35, 0.25, 0.3}, 3, 4, kFloat64);
  const Tensor x = mat(kLogits, 3, 4, kFloat64);
  const Tensor y = labels(kLabels);
  const Tensor soft = mat({0.1, 0.2, 0.3, 0.4, 0, 0, 0, 1, 0.5, 0.5, 0, 0}, 3, 4, kFloat64);
  const Tensor binary = mat({1, 0, 0.5, 0, 1, 1, 0, 0.25, 1, 0, 0, 1}, 3, 4, kFloat64);
  const auto check = [](const losses::Loss& loss, const Tensor& target, const Tensor& input) {
    EXPECT_EQ(loss(target, input).dtype(), kFloat64);
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& in) { return loss(target, in[0]); }, {input}))
        << loss.name();
  };
  check(losses::SparseCategoricalCrossentropy(), y, p);
  check(losses::SparseCategoricalCrossentropy({.from_logits = true}), y, x);
  check(losses::CategoricalCrossentropy(), soft, p);
  check(losses::CategoricalCrossentropy({.from_logits = true}), soft, x);
  check(losses::BinaryCrossentropy(), binary, p);
  check(losses::BinaryCrossentropy({.from_logits = true}), binary, x);
  check(losses::MeanSquaredError(), soft, x);
}

// ---- lookup and custom losses ----

TEST(LossesTest, GetByName) {
  EXPECT_EQ(losses::get("sparse_categorical_crossentropy").name(),
            "sparse_categorical_crossentropy");
  EXPECT_EQ(losses::get("categorical_crossentropy").name(), "categorical_crossentropy");
  EXPECT_EQ(losses::get("binary_crossentropy").name(), "binary_crossentropy");
  EXPECT_EQ(losses::get("mse").name(), "mean_squared_error");
  EXPECT_EQ(losses::get("mean_squared_error").name(), "mean_squared_error");
  try {
    losses::get("hinge");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("sparse_categorical_crossentropy"), std::string::npos);
  }
  EXPECT_THROW(losses::Loss()(vec({1}), vec({1})), ValueError);
}

TEST(LossesTest, CustomLoss) {
  const losses::Loss l1("mean_absolute_error", [](const Tensor& t, const Tensor& p) {
    return mean(abs(p.to(kFloat32) - t.to(kFloat32)));
  });
  EXPECT_EQ(l1.name(), "mean_absolute_error");
  EXPECT_EQ(l1(vec({1, 2}), vec({0, 4})).item(), 1.5);
}

}  // namespace
}  // namespace mixprec
