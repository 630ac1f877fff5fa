// fit()'s graphed training step (src/models/graphed_step.h) where it can run without a GPU: on the
// CPU it is train_step() itself (bit-identical weights, loss and metrics, nothing replayed, nothing
// said), and the optimizers' answers to "can a captured step be replayed?"
// (OptimizerImpl::graph_replay_obstacle) and set_iterations, which the GPU path relies on. The
// capture and replays themselves: tests/gpu/cuda_graph_test.cpp.
#include "models/graphed_step.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/cuda_graph.h"
#include "mixprec/mixprec.h"
#include "models/train_step.h"
#include "models/training_state.h"
#include "optimizers/optimizer_impl.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::PolicyGuard;

Model mlp(const std::string& name) {
  set_seed(11);
  auto in = Input({6});
  auto h = layers::Dense(8, {.activation = "relu", .name = name + "_h"})(in);
  auto out = layers::Dense(3, {.name = name + "_o"})(h);
  return Model(in, layers::Activation("softmax", {.dtype = "float32"})(out), {.name = name});
}

std::vector<std::uint32_t> weight_bits(const Model& model) {
  std::vector<std::uint32_t> out;
  for (const Tensor& w : model.get_weights()) {
    for (float f : w.to_vector<float>()) {
      std::uint32_t b = 0;
      std::memcpy(&b, &f, sizeof b);
      out.push_back(b);
    }
  }
  return out;
}

void check_cpu_identity(const char* policy) {
  PolicyGuard guard(policy);
  clear_session();
  Model a = mlp("a"), b = mlp("b");
  b.set_weights(a.get_weights());
  a.compile({.optimizer = optimizers::RMSprop(), .metrics = {"accuracy"}});
  b.compile({.optimizer = optimizers::RMSprop(), .metrics = {"accuracy"}});
  models::StepContext ca(a, *a.model_impl().training);
  models::StepContext cb(b, *b.model_impl().training);
  models::GraphedTrainStep graphed(cb, true);
  for (int step = 0; step < 7; ++step) {
    // The last batch smaller, as an epoch's last.
    const std::int64_t rows = step == 6 ? 3 : 8;
    Generator gen(100 + static_cast<std::uint64_t>(step));
    const Tensor x = random_uniform({rows, 6}, -1.0, 1.0, {}, gen);
    const Tensor y = random_uniform({rows}, 0.0, 3.0, {}, gen).to(DType::int64);
    models::train_step(ca, x, y, {1, step + 1});
    graphed.run(x, y, {1, step + 1});
    if (step % 3 == 2) graphed.sync_execution();
  }
  EXPECT_EQ(weight_bits(a), weight_bits(b)) << policy;
  const auto ra = ca.state.train_metrics.results(), rb = cb.state.train_metrics.results();
  ASSERT_EQ(ra.size(), rb.size());
  for (std::size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].first, rb[i].first);
    EXPECT_EQ(ra[i].second, rb[i].second) << ra[i].first << " under " << policy;
  }
  EXPECT_EQ(a.optimizer().iterations(), b.optimizer().iterations());
  EXPECT_FALSE(graphed.graphed());
  EXPECT_EQ(graphed.replays(), 0);
  EXPECT_EQ(graphed.captures(), 0);
  EXPECT_EQ(graphed.eager_steps(), 7);
  EXPECT_TRUE(graphed.reasons().empty()) << "nothing is said on the CPU";
}

TEST(GraphedStepTest, OnTheCpuItIsTrainStepBitForBit) {
  check_cpu_identity("float32");
  check_cpu_identity("mixed_float16");
  check_cpu_identity("mixed_bfloat16");
}

std::string obstacle(const optimizers::Optimizer& opt) {
  return opt.impl()->graph_replay_obstacle();
}

TEST(GraphedStepTest, OptimizersSayWhetherACapturedStepReplaysCorrectly) {
  EXPECT_EQ(obstacle(optimizers::SGD()), "");
  EXPECT_EQ(obstacle(optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9})), "");
  EXPECT_EQ(obstacle(optimizers::RMSprop()), "");
  EXPECT_EQ(obstacle(mixed_precision::LossScaleOptimizer(optimizers::RMSprop())), "");
  // Adam's and AdamW's bias correction and a schedule change the constants every step: a
  // captured step records them and each replay rewrites them (core::ReplayParameters).
  EXPECT_EQ(obstacle(optimizers::Adam()), "");
  EXPECT_EQ(obstacle(optimizers::AdamW()), "");
  EXPECT_EQ(obstacle(mixed_precision::LossScaleOptimizer(optimizers::Adam())), "");
  EXPECT_EQ(obstacle(mixed_precision::LossScaleOptimizer(optimizers::AdamW())), "");
  const optimizers::LearningRate schedule(optimizers::schedules::ExponentialDecay{
      .initial_learning_rate = 0.1, .decay_steps = 10, .decay_rate = 0.5});
  EXPECT_EQ(obstacle(optimizers::SGD({.learning_rate = schedule})), "");
  EXPECT_EQ(obstacle(optimizers::Adam({.learning_rate = schedule})), "");
  // Clipping by norm reads the norms back to the host.
  EXPECT_NE(obstacle(optimizers::SGD({.learning_rate = 0.1, .clipnorm = 1.0})).find("norm"),
            std::string::npos);
  EXPECT_NE(obstacle(optimizers::AdamW({.global_clipnorm = 1.0})).find("norm"), std::string::npos);
  EXPECT_NE(obstacle(mixed_precision::LossScaleOptimizer(optimizers::Adam({.clipnorm = 1.0}))), "");
}

TEST(GraphedStepTest, SetIterationsMovesTheCountThroughALossScaleOptimizer) {
  mixed_precision::LossScaleOptimizer lso{optimizers::RMSprop()};
  lso.impl()->set_iterations(41);
  EXPECT_EQ(lso.iterations(), 41);
  EXPECT_EQ(lso.inner_optimizer().iterations(), 41);
}

TEST(GraphedStepTest, ThePublicGraphRefusesTheCpu) {
  try {
    cuda::Graph::capture(Device::cpu(), [] {});
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("need a CUDA device"), std::string::npos) << e.what();
  }
  cuda::Graph none;
  EXPECT_FALSE(none.captured());
  EXPECT_EQ(none.replays(), 0);
  EXPECT_THROW(none.replay(), DeviceError);
  // copy_into: in place, with the dtype conversion of Tensor::assign.
  const Tensor dst = zeros({2, 2});
  const void* storage = dst.data_ptr();
  cuda::copy_into(dst, from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(dst.data_ptr(), storage);
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace mixprec
