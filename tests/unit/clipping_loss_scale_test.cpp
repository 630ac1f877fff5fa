// global_clipnorm under loss scaling: a LossScaleOptimizer unscales first, so the inner optimizer
// clips the true gradients (their norm, not the scaled one), and a skipped (non-finite) step
// changes nothing. With a power-of-two scale, scaling and unscaling are exact in float32 (and in
// float16 for gradients away from its subnormals and overflow), so the weights must equal the
// unscaled optimizer's bit for bit: the stated bound is 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using mixed_precision::LossScaleOptimizer;
using optimizers::AdamW;

constexpr double kScale = 32768.0;  // 2^15

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

// Gradients whose global norm is about 3, above the clip limit of 1, and below 2 in magnitude
// (float16 holds them times 2^15).
std::vector<std::vector<double>> gradients_at(int k) {
  std::vector<double> a(5), b(3);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1.5 * std::cos(0.3 + 1.7 * i + 0.9 * k);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.2 * std::sin(0.8 + 1.3 * i + 0.7 * k);
  return {a, b};
}

std::vector<double> times(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

const optimizers::AdamWOptions kClipped{.learning_rate = 0.05,
                                        .weight_decay = 0.1,
                                        .epsilon = 0.5,  // large: Adam's step depends on |g|
                                        .global_clipnorm = 1.0};

// Steps `steps` times; `scaled` feeds gradients * 2^15 (in `dtype`) through a fixed-scale
// LossScaleOptimizer's get_unscaled_gradients, otherwise the plain optimizer gets them in `dtype`.
std::vector<Tensor> train(bool scaled, DType dtype, int steps,
                          optimizers::AdamWOptions options = kClipped) {
  std::vector<Tensor> w = {f32({0.5, -1.0, 2.0, 0.25, -0.5}), f32({1.5, 0.75, -2.0})};
  AdamW inner(options);
  LossScaleOptimizer lso(inner, {.dynamic = false, .initial_scale = kScale});
  for (int k = 0; k < steps; ++k) {
    const auto g = gradients_at(k);
    if (scaled) {
      lso.apply_gradients(lso.get_unscaled_gradients({f32(times(g[0], kScale)).to(dtype),
                                                      f32(times(g[1], kScale)).to(dtype)}),
                          w);
    } else {
      // The same values the scaled path sees after unscaling: rounded in `dtype` at the scaled
      // magnitude, which for a power of two is the rounding at the true magnitude.
      inner.apply_gradients({f32(g[0]).to(dtype), f32(g[1]).to(dtype)}, w);
    }
  }
  return w;
}

TEST(ClippingLossScaleTest, GlobalClipnormClipsTheUnscaledGradients) {
  for (DType dtype : {kFloat32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<Tensor> with_scaling = train(true, dtype, 4);
    const std::vector<Tensor> without = train(false, dtype, 4);
    for (std::size_t i = 0; i < with_scaling.size(); ++i) {
      EXPECT_TRUE(same_bits(with_scaling[i], without[i])) << "variable " << i;
    }
  }
  // A limit between the true norm (about 3) and the scaled one (about 3 * 2^15): clipping the
  // scaled gradients would clip, clipping the true ones must not. The result equals the
  // unclipped optimizer's.
  optimizers::AdamWOptions between = kClipped, unclipped = kClipped;
  between.global_clipnorm = 10.0;
  unclipped.global_clipnorm.reset();
  const std::vector<Tensor> scaled = train(true, kFloat32, 4, between);
  const std::vector<Tensor> reference = train(false, kFloat32, 4, unclipped);
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    EXPECT_TRUE(same_bits(scaled[i], reference[i])) << "variable " << i;
  }
}

TEST(ClippingLossScaleTest, ClippingChangesTheResultWhenTheNormExceedsTheLimit) {
  optimizers::AdamWOptions unclipped = kClipped;
  unclipped.global_clipnorm.reset();
  const std::vector<Tensor> clipped = train(true, kFloat32, 4);
  const std::vector<Tensor> free = train(true, kFloat32, 4, unclipped);
  double largest = 0;
  for (std::size_t i = 0; i < clipped.size(); ++i) {
    const std::vector<double> a = clipped[i].to_vector<double>(), b = free[i].to_vector<double>();
    for (std::size_t j = 0; j < a.size(); ++j) largest = std::max(largest, std::abs(a[j] - b[j]));
  }
  EXPECT_GT(largest, 1e-2);
  // A limit above the norm clips nothing: the unclipped result, bit for bit.
  optimizers::AdamWOptions loose = kClipped;
  loose.global_clipnorm = 1e6;
  const std::vector<Tensor> untouched = train(true, kFloat32, 4, loose);
  for (std::size_t i = 0; i < free.size(); ++i) EXPECT_TRUE(same_bits(untouched[i], free[i]));
}

TEST(ClippingLossScaleTest, ASkippedStepClipsAndChangesNothing) {
  std::vector<Tensor> w = {f32({0.5, -1.0, 2.0, 0.25, -0.5}), f32({1.5, 0.75, -2.0})};
  const std::vector<Tensor> start = {f32(w[0].to_vector<double>()), f32(w[1].to_vector<double>())};
  LossScaleOptimizer lso(AdamW(kClipped), {.dynamic = false, .initial_scale = kScale});
  std::vector<double> a = times(gradients_at(0)[0], kScale);
  a[2] = std::numeric_limits<double>::infinity();  // the global norm is inf
  lso.apply_gradients(lso.get_unscaled_gradients({f32(a), f32(times(gradients_at(0)[1], kScale))}),
                      w);
  EXPECT_TRUE(lso.last_step_skipped());
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(same_bits(w[i], start[i]));
  // The slots stayed zero: the clipping factor (0 for an infinite norm) reached nothing.
  const optimizers::OptimizerState state = lso.get_state();
  ASSERT_FALSE(state.inner.at(0).slots.empty());
  for (const auto& slot : state.inner.at(0).slots) {
    for (double v : slot.value.to_vector<double>()) EXPECT_EQ(v, 0.0) << slot.name;
  }
}

}  // namespace
}  // namespace mixprec
