// The functional model's Add + LayerNormalization / RMSNormalization fusion (src/models/model.cpp,
// ops/add_layer_norm.h): a pre-norm residual model gives the same bits with the fusion on and off
// (outputs, loss, gradients) under float32, mixed_float16 and mixed_bfloat16, with the sum also a
// model output and read by the next Add; a small GPT trains to the same weights and losses; the
// fused op runs exactly where the rules allow (an Add of two same-shape inputs feeding a
// normalization that computes in its dtype), never with a broadcast, a cast, another merge, or the
// switch off.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "support/fusion_guard.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::FusionGuard;
using testing::PolicyGuard;
namespace L = layers;

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.detach().to(Device::cpu()).contiguous();
  const Tensor w = want.detach().to(Device::cpu()).contiguous();
  ASSERT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()), 0) << what;
}

std::string node_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "leaf"; }

// x (T, 16) -> Dense -> s = Add(x, h) -> y = norm(s) -> Dense -> Add(s, .) -> norm -> Dense: two
// pre-norm residual steps; outputs the first sum (a model output and an Add input too), and the
// head.
Model pre_norm_model(bool rms) {
  set_seed(9);
  const auto norm = [rms](const KerasTensor& t) {
    return rms ? L::RMSNormalization()(t) : L::LayerNormalization({.epsilon = 1e-5})(t);
  };
  const KerasTensor in = Input({5, 16});
  const KerasTensor s = L::Add()({in, L::Dense(16)(in)});
  const KerasTensor t = L::Add()({s, L::Dense(16, {.activation = "gelu_tanh"})(norm(s))});
  const KerasTensor head = L::Dense(4, {.dtype = "float32"})(norm(t));
  return Model(in, std::vector<KerasTensor>{s, head});
}

std::vector<Tensor> step(Model& m, bool fusion) {
  FusionGuard guard(fusion);
  Generator gen(11);
  const Tensor x = random_uniform({3, 5, 16}, -1.0, 2.0, {}, gen);
  GradientTape tape;
  const std::vector<Tensor> out = m(std::vector<Tensor>{x}, {.training = true});
  const Tensor loss = add(mean(mul(out[1], out[1])), mean(out[0].to(DType::float32)));
  std::vector<Tensor> all = tape.gradient(loss, m.trainable_variables());
  all.push_back(out[0]);
  all.push_back(out[1]);
  all.push_back(loss);
  return all;
}

TEST(AddLayerNormFusionTest, PreNormModelGivesTheSameBitsFusedAndUnfused) {
  for (const bool rms : {false, true}) {
    for (const char* policy : {"float32", "mixed_float16", "mixed_bfloat16"}) {
      SCOPED_TRACE(std::string(policy) + (rms ? " rms" : " layer"));
      PolicyGuard p(policy);
      Model m = pre_norm_model(rms);
      const std::vector<Tensor> fused = step(m, true), plain = step(m, false);
      ASSERT_EQ(fused.size(), plain.size());
      for (std::size_t i = 0; i < fused.size(); ++i) {
        expect_same_bits(fused[i], plain[i], "result " + std::to_string(i));
      }
    }
  }
}

// The node that made the model's first output (the sum) with the fusion on or off.
std::string sum_node(const Model& m, const Tensor& x, bool fusion, bool training = true) {
  FusionGuard guard(fusion);
  const std::vector<Tensor> out = m(std::vector<Tensor>{x}, {.training = training});
  return node_name(out[0]);
}

TEST(AddLayerNormFusionTest, WhereTheModelFusesIt) {
  const Tensor x = random_uniform({2, 5, 16});
  for (const bool rms : {false, true}) {
    const Model m = pre_norm_model(rms);
    EXPECT_EQ(sum_node(m, x, true), "AddNormSumBackward");
    EXPECT_NE(sum_node(m, x, false), "AddNormSumBackward");
  }
  // Inference gives the same values as the unfused path.
  {
    const Model m = pre_norm_model(false);
    FusionGuard on(true);
    const std::vector<Tensor> a = m(std::vector<Tensor>{x});
    FusionGuard off(false);
    const std::vector<Tensor> b = m(std::vector<Tensor>{x});
    expect_same_bits(a[1], b[1], "inference");
  }
  const auto model = [](const std::string& what) {
    const KerasTensor in = Input({5, 16});
    const KerasTensor h = L::Dense(16)(in);
    KerasTensor s;
    if (what == "multiply") {
      s = L::Multiply()({in, h});
    } else if (what == "three") {
      s = L::Add()({in, h, h});
    } else {
      s = L::Add()({in, h});
    }
    // A normalization whose policy casts its input: the fused op would skip the cast.
    const KerasTensor y = what == "cast" ? L::LayerNormalization({.dtype = "float64"})(s)
                                         : L::LayerNormalization()(s);
    return Model(in, std::vector<KerasTensor>{s, y});
  };
  EXPECT_EQ(sum_node(model("plain"), x, true), "AddNormSumBackward");
  EXPECT_NE(sum_node(model("cast"), x, true), "AddNormSumBackward");
  EXPECT_NE(sum_node(model("multiply"), x, true), "AddNormSumBackward");
  EXPECT_NE(sum_node(model("three"), x, true), "AddNormSumBackward");
  // A broadcast Add: (5, 16) + (1, 16).
  const KerasTensor in = Input({5, 16}), row = Input({1, 16});
  const KerasTensor s = L::Add()({in, row});
  const Model broadcast(std::vector<KerasTensor>{in, row},
                        std::vector<KerasTensor>{s, L::LayerNormalization()(s)});
  FusionGuard guard(true);
  const std::vector<Tensor> out =
      broadcast(std::vector<Tensor>{x, random_uniform({2, 1, 16})}, {.training = true});
  EXPECT_NE(node_name(out[0]), "AddNormSumBackward");
}

// A small GPT trained a few AdamW steps: the same losses and weights with the fusion on and off.
std::vector<Tensor> train_gpt(const char* policy, bool fusion, std::vector<double>& losses) {
  FusionGuard guard(fusion);
  PolicyGuard p(policy);
  set_seed(4);
  Model m = applications::gpt(
      {.layers = 2, .width = 32, .heads = 4, .context = 16, .vocab = 23, .dropout = 0.1});
  m.compile({.optimizer = optimizers::AdamW({.learning_rate = 3e-3}),
             .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4 * 12; ++i) ids.push_back(static_cast<std::int32_t>((i * 7 + 3) % 23));
  const Tensor x = from_vector(ids, {4, 12});
  for (int s = 0; s < 3; ++s) losses.push_back(m.train_on_batch(x, x).at("loss"));
  return m.get_weights();
}

TEST(AddLayerNormFusionTest, GptTrainsToTheSameBits) {
  for (const char* policy : {"float32", "mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    std::vector<double> fused_losses, plain_losses;
    const std::vector<Tensor> fused = train_gpt(policy, true, fused_losses);
    const std::vector<Tensor> plain = train_gpt(policy, false, plain_losses);
    ASSERT_EQ(fused_losses.size(), plain_losses.size());
    for (std::size_t i = 0; i < fused_losses.size(); ++i) {
      EXPECT_EQ(fused_losses[i], plain_losses[i]) << "loss of step " << i;
    }
    ASSERT_EQ(fused.size(), plain.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      expect_same_bits(fused[i], plain[i], "weight " + std::to_string(i));
    }
  }
}

}  // namespace
}  // namespace mixprec
