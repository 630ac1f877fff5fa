// Issue 33, the training-level strengthening: a float16 gradient with one Inf far inside a large
// tensor (not in its first or last chunk, and in the middle one of several gradients), passed
// through LossScaleOptimizer (get_unscaled_gradients, then apply_gradients), skips the step: the
// variables and the inner optimizer's slots stay bit-identical, the scale halves, the skip is
// counted. The same gradients without the Inf are applied. (The kernel alone is tested in
// training_kernels_test.cpp; this goes through the optimizer.)
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/mixprec.h"
#include "mixprec/optimizers.h"

namespace mixprec {
namespace {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// A float16 gradient of n values in [-2, 2) (scaled by `scale`, as a scaled loss's backward pass
// gives them), with an Inf at `inf_at` when it is >= 0.
Tensor half_gradient(std::int64_t n, double scale, std::int64_t inf_at, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  Generator g(seed);
  for (float& x : v) x = static_cast<float>((g.uniform() * 4.0 - 2.0) * scale);
  if (inf_at >= 0) v[static_cast<std::size_t>(inf_at)] = std::numeric_limits<float>::infinity();
  return from_vector(v, {n}).to(kFloat16);
}

TEST(LossScaleSkipTest, OneInfFarInsideALargeFloat16GradientSkipsTheStep) {
  const std::vector<std::int64_t> sizes = {4099, (1 << 20) + 7, 65537};
  mixed_precision::LossScaleOptimizer opt(optimizers::Adam({.learning_rate = 0.01}),
                                          {.initial_scale = 1024});
  std::vector<Tensor> variables;
  for (std::int64_t n : sizes) variables.push_back(zeros({n}));
  const auto gradients = [&](std::int64_t inf_at, std::uint64_t seed) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      grads.push_back(half_gradient(sizes[i], opt.loss_scale(), i == 1 ? inf_at : -1, seed + i));
    }
    return grads;
  };

  // A finite step first, so that Adam has slots to leave alone.
  opt.apply_gradients(opt.get_unscaled_gradients(gradients(-1, 1)), variables);
  ASSERT_FALSE(opt.last_step_skipped());
  std::vector<Tensor> before;
  for (const Tensor& v : variables) before.push_back(from_vector(v.to_vector<float>(), v.shape()));
  const optimizers::OptimizerState slots_before = opt.get_state();
  ASSERT_FALSE(slots_before.inner.at(0).slots.empty());

  // The Inf at 40% of the middle gradient: deep inside, far from every edge.
  const std::int64_t inf_at = sizes[1] * 2 / 5 + 3;
  opt.apply_gradients(opt.get_unscaled_gradients(gradients(inf_at, 11)), variables);
  EXPECT_TRUE(opt.last_step_skipped());
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(opt.loss_scale(), 512.0);
  for (std::size_t i = 0; i < variables.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(variables[i], before[i])) << "variable " << i << " changed";
  }
  const optimizers::OptimizerState slots_after = opt.get_state();
  ASSERT_EQ(slots_after.inner.at(0).slots.size(), slots_before.inner.at(0).slots.size());
  for (std::size_t i = 0; i < slots_after.inner.at(0).slots.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(slots_after.inner.at(0).slots[i].value,
                              slots_before.inner.at(0).slots[i].value))
        << slots_after.inner.at(0).slots[i].name << " changed";
  }

  // The same gradients without the Inf: applied.
  opt.apply_gradients(opt.get_unscaled_gradients(gradients(-1, 11)), variables);
  EXPECT_FALSE(opt.last_step_skipped());
  EXPECT_FALSE(bitwise_equal(variables[1], before[1]));
}

}  // namespace
}  // namespace mixprec
