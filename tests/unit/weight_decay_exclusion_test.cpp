// AdamW's exclude_from_weight_decay (Keras 3: Optimizer.exclude_from_weight_decay(var_list,
// var_names), plus AdamWOptions::exclude_from_weight_decay): an excluded variable's update is
// Adam's bit for bit, the others are decayed as before; matching by the weight's own name; a
// LossScaleOptimizer passes the call on; optimizers without weight decay refuse it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec {
namespace {

using optimizers::Adam;
using optimizers::AdamW;

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}

std::vector<double> gradient_at(int k, std::size_t n, double phase) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::cos(phase + 1.1 * i + 0.9 * k) * (0.5 + i);
  return g;
}

// A new float32 tensor with t's values (its own storage).
Tensor copy_of(const Tensor& t) {
  return from_vector(t.to_vector<double>(), t.shape(), {.dtype = kFloat32});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

const std::vector<double> kA = {0.5, -1.25, 2.0, 0.1};
const std::vector<double> kB = {3.0, -0.75, 1.5};

// Runs `opt` for `steps` steps on two variables (starting at kA and kB) with fixed gradients.
std::pair<Tensor, Tensor> run(optimizers::Optimizer opt, int steps, Tensor a = f32(kA),
                              Tensor b = f32(kB)) {
  for (int k = 0; k < steps; ++k) {
    opt.apply_gradients({f32(gradient_at(k, kA.size(), 0.4)), f32(gradient_at(k, kB.size(), 1.3))},
                        {a, b});
  }
  return {a, b};
}

const optimizers::AdamWOptions kAdamW{
    .learning_rate = 0.05, .weight_decay = 0.5, .beta_1 = 0.8, .beta_2 = 0.95, .epsilon = 0.01};
const optimizers::AdamOptions kAdam{
    .learning_rate = 0.05, .beta_1 = 0.8, .beta_2 = 0.95, .epsilon = 0.01};

TEST(WeightDecayExclusionTest, AnExcludedVariableGetsAdamsUpdateBitForBit) {
  Tensor a = f32(kA), b = f32(kB);
  AdamW opt(kAdamW);
  opt.exclude_from_weight_decay({a});
  run(opt, 5, a, b);
  const auto [adam_a, adam_b] = run(Adam(kAdam), 5);
  const auto [adamw_a, adamw_b] = run(AdamW(kAdamW), 5);
  EXPECT_TRUE(same_bits(a, adam_a));    // excluded: Adam's update
  EXPECT_TRUE(same_bits(b, adamw_b));   // not excluded: AdamW's, unchanged
  EXPECT_FALSE(same_bits(b, adam_b));   // and the decay does change it
  EXPECT_FALSE(same_bits(a, adamw_a));  // (so the first check can fail)
}

TEST(WeightDecayExclusionTest, VarNamesMatchTheWeightNameOfLayerVariables) {
  // A Dense layer's variables are "dense_x/kernel" and "dense_x/bias"; a layer named "bias_dense"
  // shows that the layer's part of the name is not matched (Keras matches variable.name).
  for (bool by_option : {false, true}) {
    SCOPED_TRACE(by_option ? "AdamWOptions::exclude_from_weight_decay" : "the method");
    const layers::Dense layer(3, {.name = "bias_dense"});
    const Tensor x = f32({0.5, -1.0}).reshape({1, 2});
    (void)layer(x);  // builds the variables
    const std::vector<Tensor> vars = layer.trainable_variables();
    ASSERT_EQ(vars.size(), 2u);
    const Tensor kernel = vars[0], bias = vars[1];
    optimizers::AdamWOptions options = kAdamW;
    if (by_option) options.exclude_from_weight_decay = {"bias"};
    AdamW opt(options);
    if (!by_option) opt.exclude_from_weight_decay({}, {"bias"});
    // Copies of the starting values, stepped by plain Adam and AdamW.
    Tensor k_adamw = copy_of(kernel), b_adam = copy_of(bias);
    AdamW reference_w(kAdamW);
    Adam reference(kAdam);
    for (int k = 0; k < 3; ++k) {
      const Tensor gk = f32(gradient_at(k, 6, 0.2)).reshape({2, 3});
      const Tensor gb = f32(gradient_at(k, 3, 0.7));
      opt.apply_gradients({gk, gb}, {kernel, bias});
      reference_w.apply_gradients({gk}, {k_adamw});
      reference.apply_gradients({gb}, {b_adam});
    }
    EXPECT_TRUE(same_bits(bias, b_adam));
    EXPECT_TRUE(same_bits(kernel, k_adamw));
    EXPECT_EQ(opt.impl()->weight_decay_excluded_names(), std::vector<std::string>{"bias"});
  }
}

TEST(WeightDecayExclusionTest, LossScaleOptimizerPassesTheExclusionToItsInnerOptimizer) {
  Tensor a = f32(kA), b = f32(kB);
  mixed_precision::LossScaleOptimizer opt(AdamW(kAdamW), {.dynamic = false, .initial_scale = 1.0});
  opt.exclude_from_weight_decay({b});
  run(opt, 4, a, b);
  const auto [adam_a, adam_b] = run(Adam(kAdam), 4);
  const auto [adamw_a, adamw_b] = run(AdamW(kAdamW), 4);
  EXPECT_TRUE(same_bits(a, adamw_a));
  EXPECT_TRUE(same_bits(b, adam_b));
}

TEST(WeightDecayExclusionTest, OptimizersWithoutWeightDecayRefuseIt) {
  Tensor a = f32(kA);
  for (optimizers::Optimizer opt :
       {optimizers::Optimizer(Adam()), optimizers::Optimizer(optimizers::SGD()),
        optimizers::Optimizer(optimizers::RMSprop())}) {
    try {
      opt.exclude_from_weight_decay({a}, {"bias"});
      FAIL() << opt.name() << ": expected a ValueError";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("AdamW"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(AdamW().exclude_from_weight_decay({}, {""}), ValueError);
  EXPECT_THROW(AdamW({.exclude_from_weight_decay = {""}}), ValueError);
  EXPECT_THROW(AdamW().exclude_from_weight_decay({Tensor()}), ValueError);
}

}  // namespace
}  // namespace mixprec
