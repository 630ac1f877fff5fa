// ops::moving_average_update (BatchNormalization's moving statistics in one backend call): bit for
// bit the composition moving * momentum + value * weight of tensor ops that it replaces, in
// float32 and float64, for several operands at once; the layer's moving statistics (now updated
// through it) keep the composition's bits; bad operands are refused with the op's name and nothing
// is written.
#include "ops/moving_average.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

Tensor sample(std::int64_t n, DType dtype, std::uint64_t seed, double lo, double hi) {
  set_seed(seed);
  return random_uniform(Shape{n}, lo, hi, {.dtype = dtype});
}

void expect_same_bits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << "element " << i;
}

TEST(MovingAverageTest, EqualsTheCompositionBitForBit) {
  for (DType dtype : {DType::float32, DType::float64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // Momentum and weights that are not representable: both sides round them to the dtype once.
    const double momentum = 0.99, weights[] = {0.01, 0.01 * 4097.0 / 4096.0, 0.3};
    const std::int64_t sizes[] = {3, 1000, 64};
    std::vector<Tensor> moving, values, expected;
    std::vector<MovingAverageOperand> operands;
    for (int k = 0; k < 3; ++k) {
      moving.push_back(sample(sizes[k], dtype, 10 + k, -2.0, 5.0));
      values.push_back(sample(sizes[k], dtype, 20 + k, -3.0, 3.0));
      expected.push_back(moving[k] * momentum + values[k] * weights[k]);
      operands.push_back({moving[k], values[k], weights[k]});
    }
    ops::moving_average_update("test", operands, momentum);
    for (int k = 0; k < 3; ++k) expect_same_bits(moving[k], expected[k]);
  }
}

TEST(MovingAverageTest, BatchNormalizationMovingStatisticsKeepTheCompositionsBits) {
  // Two training calls: the layer's moving statistics equal the composition applied twice to the
  // batch statistics (the unbiased variance, n = 12 values per channel).
  layers::BatchNormalization bn({.momentum = 0.9});
  set_seed(5);
  const Tensor x = random_uniform(Shape{3, 4, 5}, -1.0, 2.0);
  Tensor mm = zeros(Shape{5}), mv = ones(Shape{5});
  for (int step = 0; step < 2; ++step) {
    bn(x, {.training = true});
    const BatchNormOutput s = batch_norm_training(x, ones(Shape{5}), zeros(Shape{5}), 1e-3);
    mm = mm * 0.9 + s.mean * (1.0 - 0.9);
    mv = mv * 0.9 + s.variance * (12.0 / 11.0 * (1.0 - 0.9));
  }
  expect_same_bits(bn.moving_mean(), mm);
  expect_same_bits(bn.moving_variance(), mv);
}

TEST(MovingAverageTest, BadOperandsAreRefusedAndNothingIsWritten) {
  const Tensor a = full(Shape{4}, 1.0), b = full(Shape{4}, 2.0);
  const auto refused = [&](std::vector<MovingAverageOperand> operands, const char* needle) {
    try {
      ops::moving_average_update("bn_7", operands, 0.5);
      ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bn_7"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // The first operand is fine; the second is bad: the first must stay untouched too.
  refused({{a, b, 0.5}, {full(Shape{4}, 1.0, {.dtype = DType::float16}), b, 0.5}}, "float32");
  refused({{a, b, 0.5}, {full(Shape{4}, 1.0), full(Shape{5}, 1.0), 0.5}}, "shape");
  refused({{a, b, 0.5}, {full(Shape{4}, 1.0), full(Shape{4}, 1.0, {.dtype = DType::float64}), 0.5}},
          "dtype");
  const Tensor wide = full(Shape{4, 2}, 1.0);
  ASSERT_FALSE(wide.transpose(0, 1).is_contiguous());
  refused({{a, b, 0.5}, {wide.transpose(0, 1), full(Shape{2, 4}, 1.0), 0.5}}, "contiguous");
  refused({{a, b, 0.5}, {Tensor(), b, 0.5}}, "");
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(4, 1.0f));
}

}  // namespace
}  // namespace mixprec
