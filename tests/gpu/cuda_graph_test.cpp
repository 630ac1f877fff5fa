// Whole training steps captured as CUDA graphs and replayed (issue 28): fit()'s graphed step
// (src/models/graphed_step.h) against the eager train_step over 50 steps under mixed_float16 with
// an overflow injected after the capture (the skip and the halving happen inside the graph), bit
// for bit; one host wait per execution of N steps; no allocation outside the graph's pool while it
// replays; Adam, AdamW (weight decay, an exclusion, a schedule) and Dropout replayed bit for bit
// (their per-step values rewritten before each replay, core::ReplayParameters); the public
// mixprec::cuda::Graph in the seed's custom loop; the eager fallbacks (clipnorm,
// MIXPREC_CUDA_GRAPHS=0, a smaller last batch). Without a GPU every test reports SKIPPED.
#include "mixprec/cuda_graph.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/allocator.h"
#include "gpu/gpu_support.h"
#include "models/graphed_step.h"
#include "models/model_impl.h"
#include "models/train_step.h"
#include "models/training_state.h"
#include "support/policy_guard.h"

namespace mixprec::testing {
namespace {

Model seed_mlp(const std::string& name) {
  set_seed(5);
  DeviceScope on(kGpu);
  auto in = Input({64});
  auto h = layers::Dense(128, {.activation = "relu", .name = name + "_1"})(in);
  h = layers::Dense(128, {.activation = "relu", .name = name + "_2"})(h);
  auto out = layers::Dense(10, {.name = name + "_o"})(h);
  return Model(in, layers::Activation("softmax", {.dtype = "float32"})(out), {.name = name});
}

std::vector<std::uint32_t> weight_bits(const Model& model) {
  std::vector<std::uint32_t> out;
  for (const Tensor& w : model.get_weights()) {
    for (float f : on_cpu(w).to(DType::float32).to_vector<float>()) {
      std::uint32_t b = 0;
      std::memcpy(&b, &f, sizeof b);
      out.push_back(b);
    }
  }
  return out;
}

// Batch `step` on the GPU (as the prefetcher delivers them); `overflow` puts 1e6 into one input,
// which is Inf in float16: the step's gradients are non-finite.
std::pair<Tensor, Tensor> batch(int step, std::int64_t rows, bool overflow = false) {
  Generator gen(1000 + static_cast<std::uint64_t>(step));
  std::vector<float> x = random_uniform({rows, 64}, -1.0, 1.0, {}, gen).to_vector<float>();
  if (overflow) x[7] = 1e6f;
  const Tensor y = random_uniform({rows}, 0.0, 10.0, {}, gen).to(DType::int64);
  return {from_vector(x, {rows, 64}).to(kGpu), y.to(kGpu)};
}

struct Pair {
  Model eager = seed_mlp("eager"), graphed = seed_mlp("graphed");
  std::unique_ptr<models::StepContext> ce, cg;
  explicit Pair(const optimizers::Optimizer& opt_e, const optimizers::Optimizer& opt_g) {
    graphed.set_weights(eager.get_weights());
    eager.compile({.optimizer = opt_e, .metrics = {"accuracy"}});
    graphed.compile({.optimizer = opt_g, .metrics = {"accuracy"}});
    ce = std::make_unique<models::StepContext>(eager, *eager.model_impl().training);
    cg = std::make_unique<models::StepContext>(graphed, *graphed.model_impl().training);
  }
};

TEST(CudaGraphTest, ReplayedStepsMatchEagerStepsBitForBitWithAnOverflow) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  clear_session();
  Pair p{optimizers::RMSprop(), optimizers::RMSprop()};
  models::GraphedTrainStep graphed(*p.cg, false);
  for (int step = 0; step < 50; ++step) {
    const auto [x, y] = batch(step, 32, step == 20);
    models::train_step(*p.ce, x, y, {1, step + 1});
    graphed.run(x, y, {1, step + 1});
    if (step % 10 == 9) graphed.sync_execution();
  }
  // The last, smaller batch: eager, said as the reason.
  const auto [x, y] = batch(50, 7);
  models::train_step(*p.ce, x, y, {1, 51});
  graphed.run(x, y, {1, 51});
  EXPECT_EQ(graphed.captures(), 1);
  EXPECT_EQ(graphed.replays(), 48) << "2 warm-up steps, then the capture's replay and 47 more";
  EXPECT_EQ(graphed.eager_steps(), 3);
  ASSERT_EQ(graphed.reasons().size(), 1u);
  EXPECT_NE(graphed.reasons()[0].find("another shape"), std::string::npos);
  EXPECT_EQ(weight_bits(p.eager), weight_bits(p.graphed));
  const auto& lse = *p.ce->loss_scale;
  const auto& lsg = *p.cg->loss_scale;
  EXPECT_EQ(lse.loss_scale(), lsg.loss_scale());
  EXPECT_EQ(lse.skipped_steps(), 1) << "the overflow at step 21 was skipped";
  EXPECT_EQ(lsg.skipped_steps(), 1) << "the skip happened inside the graph";
  EXPECT_EQ(lse.iterations(), lsg.iterations());
  const auto re = p.ce->state.train_metrics.results(), rg = p.cg->state.train_metrics.results();
  ASSERT_EQ(re.size(), rg.size());
  for (std::size_t i = 0; i < re.size(); ++i) {
    EXPECT_EQ(re[i].second, rg[i].second) << re[i].first;
  }
}

// 50 steps of `make()`'s optimizer, eager against graphed, under mixed_float16 with an overflow
// at step 21 (after the capture: the skip happens inside the graph, and the skipped step still
// counts an iteration, so the bias correction of every later replay depends on it).
void check_replayed_optimizer(const std::function<optimizers::Optimizer()>& make,
                              const std::string& what, bool set_rate_at_30 = false) {
  SCOPED_TRACE(what);
  clear_session();
  Pair p{make(), make()};
  models::GraphedTrainStep graphed(*p.cg, false);
  for (int step = 0; step < 50; ++step) {
    if (set_rate_at_30 && step == 30) {  // as a callback between executions
      p.eager.optimizer().set_learning_rate(0.0005);
      p.graphed.optimizer().set_learning_rate(0.0005);
    }
    const auto [x, y] = batch(step, 32, step == 20);
    models::train_step(*p.ce, x, y, {1, step + 1});
    graphed.run(x, y, {1, step + 1});
    if (step % 10 == 9) graphed.sync_execution();
  }
  EXPECT_TRUE(graphed.reasons().empty()) << graphed.reasons()[0];
  EXPECT_EQ(graphed.captures(), 1);
  EXPECT_EQ(graphed.replays(), 48);
  EXPECT_EQ(graphed.eager_steps(), 2);
  EXPECT_EQ(weight_bits(p.eager), weight_bits(p.graphed));
  EXPECT_EQ(p.ce->loss_scale->loss_scale(), p.cg->loss_scale->loss_scale());
  EXPECT_EQ(p.cg->loss_scale->skipped_steps(), 1) << "the skip happened inside the graph";
  EXPECT_EQ(p.ce->loss_scale->iterations(), p.cg->loss_scale->iterations());
  const auto re = p.ce->state.train_metrics.results(), rg = p.cg->state.train_metrics.results();
  ASSERT_EQ(re.size(), rg.size());
  for (std::size_t i = 0; i < re.size(); ++i) EXPECT_EQ(re[i].second, rg[i].second) << re[i].first;
}

TEST(CudaGraphTest, ReplayedAdamAndAdamWStepsMatchEagerStepsBitForBit) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  check_replayed_optimizer([] { return optimizers::Adam({.learning_rate = 0.003}); }, "Adam");
  check_replayed_optimizer(
      [] {
        return optimizers::AdamW(
            {.learning_rate = 0.003, .weight_decay = 0.1, .exclude_from_weight_decay = {"bias"}});
      },
      "AdamW with weight decay, biases excluded");
  check_replayed_optimizer(
      [] {
        return optimizers::AdamW(
            {.learning_rate = optimizers::schedules::CosineDecay{.initial_learning_rate = 0.0,
                                                                 .decay_steps = 30,
                                                                 .warmup_target = 0.003,
                                                                 .warmup_steps = 10},
             .weight_decay = 0.1,
             .exclude_from_weight_decay = {"bias"}});
      },
      "AdamW under a warm-up and cosine schedule");
  // Captured (step 3) at a learning rate of 0, so at a weight decay of 0 (the eager step does not
  // split the excluded variables off there), replayed at a non-zero one: the excluded biases must
  // still get no decay.
  check_replayed_optimizer(
      [] {
        return optimizers::AdamW(
            {.learning_rate = [](std::int64_t step) { return step < 3 ? 0.0 : 0.003; },
             .weight_decay = 0.1,
             .exclude_from_weight_decay = {"bias"}});
      },
      "AdamW captured at a learning rate of 0");
  // A learning rate set between executions: the next replays use it, no new capture.
  check_replayed_optimizer([] { return optimizers::Adam({.learning_rate = 0.003}); },
                           "Adam with a learning rate set at step 30", true);
}

// 50 steps of two models made by `make` (the same seeds), eager then graphed, each from the same
// default seed since they share the default generator: the replays must draw each step's keys as
// the eager steps do. `seeded` names (after the model's name) the layer with its own generator.
void check_replayed_random_model(const std::function<Model(const std::string&)>& make,
                                 const std::string& seeded, const Shape& sample) {
  clear_session();
  Model eager = make("eager"), graphed_model = make("graphed");
  graphed_model.set_weights(eager.get_weights());
  eager.compile({.optimizer = optimizers::Adam(), .metrics = {"accuracy"}});
  graphed_model.compile({.optimizer = optimizers::Adam(), .metrics = {"accuracy"}});
  models::StepContext ce(eager, *eager.model_impl().training);
  models::StepContext cg(graphed_model, *graphed_model.model_impl().training);
  const auto batch_of = [&](int step) {
    auto [x, y] = batch(step, 32, step == 20);
    std::vector<std::int64_t> dims{32};
    for (std::int64_t d : sample.dims()) dims.push_back(d);
    return std::pair<Tensor, Tensor>{x.reshape(Shape(dims)), y};
  };

  set_seed(77);
  for (int step = 0; step < 50; ++step) {
    const auto [x, y] = batch_of(step);
    models::train_step(ce, x, y, {1, step + 1});
  }
  cuda::synchronize(kGpu);
  const GeneratorState eager_default = default_generator().state();

  set_seed(77);
  models::GraphedTrainStep graphed(cg, false);
  for (int step = 0; step < 50; ++step) {
    const auto [x, y] = batch_of(step);
    graphed.run(x, y, {1, step + 1});
    if (step % 10 == 9) graphed.sync_execution();
  }
  EXPECT_TRUE(graphed.reasons().empty()) << graphed.reasons()[0];
  EXPECT_EQ(graphed.captures(), 1);
  EXPECT_EQ(graphed.replays(), 48);
  EXPECT_EQ(weight_bits(eager), weight_bits(graphed_model));
  EXPECT_TRUE(models::same_state(default_generator().state(), eager_default))
      << "the default generator after 50 graphed steps is where 50 eager steps leave it";
  Generator* own_e = eager.get_layer("eager" + seeded).impl().own_generator();
  Generator* own_g = graphed_model.get_layer("graphed" + seeded).impl().own_generator();
  ASSERT_NE(own_e, nullptr);
  ASSERT_NE(own_g, nullptr);
  EXPECT_TRUE(models::same_state(own_e->state(), own_g->state()));
  EXPECT_EQ(ce.loss_scale->skipped_steps(), 1);
  EXPECT_EQ(cg.loss_scale->skipped_steps(), 1);
  const auto re = ce.state.train_metrics.results(), rg = cg.state.train_metrics.results();
  ASSERT_EQ(re.size(), rg.size());
  for (std::size_t i = 0; i < re.size(); ++i) EXPECT_EQ(re[i].second, rg[i].second) << re[i].first;
}

// Dropout layers drawing from the default generator and from their own.
TEST(CudaGraphTest, ReplayedDropoutStepsMatchEagerStepsBitForBit) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  check_replayed_random_model(
      [](const std::string& name) {
        set_seed(5);
        DeviceScope on(kGpu);
        auto in = Input({64});
        auto h = layers::Dense(128, {.activation = "relu", .name = name + "_1"})(in);
        h = layers::Dropout(0.3, {.name = name + "_drop_default"})(h);
        h = layers::Dense(128, {.activation = "relu", .name = name + "_2"})(h);
        h = layers::Dropout(0.5, {.seed = 17, .name = name + "_drop_own"})(h);
        auto out = layers::Dense(10, {.name = name + "_o"})(h);
        return Model(in, layers::Activation("softmax", {.dtype = "float32"})(out), {.name = name});
      },
      "_drop_own", Shape({64}));
}

// GPT's dropouts: MultiHeadAttention's on the attention probabilities (its own generator here),
// a Dropout after it (the default generator).
TEST(CudaGraphTest, ReplayedAttentionDropoutStepsMatchEagerStepsBitForBit) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  check_replayed_random_model(
      [](const std::string& name) {
        set_seed(5);
        DeviceScope on(kGpu);
        auto in = Input({8, 8});
        auto h = layers::Dense(32, {.name = name + "_in"})(in);
        h = layers::MultiHeadAttention(
            2, 16, {.dropout = 0.2, .seed = 23, .name = name + "_attention"})(h, h);
        h = layers::Dropout(0.1, {.name = name + "_drop"})(h);
        h = layers::Flatten({.name = name + "_flat"})(h);
        auto out = layers::Dense(10, {.name = name + "_o"})(h);
        return Model(in, layers::Activation("softmax", {.dtype = "float32"})(out), {.name = name});
      },
      "_attention", Shape({8, 8}));
}

TEST(CudaGraphTest, OneHostWaitPerExecution) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  clear_session();
  Pair p{optimizers::RMSprop(), optimizers::RMSprop()};
  models::GraphedTrainStep graphed(*p.cg, false);
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int step = 0; step < 100; ++step) batches.push_back(batch(step, 32));
  for (int step = 0; step < 20; ++step) graphed.run(batches[step].first, batches[step].second, {});
  graphed.sync_execution();
  ASSERT_TRUE(graphed.graphed());
  constexpr int kN = 10;
  const std::int64_t before = cuda::host_synchronizations();
  for (int step = 20; step < 100; ++step) {
    graphed.run(batches[step].first, batches[step].second, {1, step + 1});
    if ((step + 1) % kN == 0) graphed.sync_execution();
  }
  const std::int64_t waits = cuda::host_synchronizations() - before;
  EXPECT_LE(waits, 80 / kN) << "80 steps in executions of " << kN;
  EXPECT_GE(waits, 1);
}

TEST(CudaGraphTest, ReplaysAllocateNothingOutsideTheGraphsPool) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  clear_session();
  Model model = seed_mlp("pool");
  auto optimizer = mixed_precision::LossScaleOptimizer(optimizers::RMSprop());
  const losses::SparseCategoricalCrossentropy loss_object;
  const auto variables = model.trainable_variables();
  const auto [x0, y0] = batch(0, 64);
  const Tensor x = x0.contiguous(), y = y0.contiguous();
  Tensor last_loss;
  auto train_step = [&] {
    GradientTape tape;
    last_loss = loss_object(y, model(x, {.training = true}));
    auto grads = optimizer.get_unscaled_gradients(
        tape.gradient(optimizer.get_scaled_loss(last_loss), variables));
    optimizer.apply_gradients(grads, variables);
  };
  train_step();
  train_step();
  cuda::Graph graph = cuda::Graph::capture(kGpu, train_step);
  ASSERT_TRUE(graph.captured());
  EXPECT_GT(graph.nodes(), 10u);
  EXPECT_GT(graph.memory().allocations, 0);
  EXPECT_GT(graph.memory().reserved_bytes, 0);
  const cuda::AllocatorStats before = cuda::allocator_stats(kGpu);
  for (int i = 0; i < 20; ++i) graph.replay();
  cuda::synchronize(kGpu);
  const cuda::AllocatorStats after = cuda::allocator_stats(kGpu);
  EXPECT_EQ(after.allocations, before.allocations) << "a replay allocated";
  EXPECT_EQ(after.device_mallocs, before.device_mallocs);
  EXPECT_EQ(after.graph_allocations, before.graph_allocations);
  EXPECT_GT(after.graph_reserved_bytes, 0);
  EXPECT_EQ(graph.replays(), 20);
  EXPECT_TRUE(std::isfinite(last_loss.item()));
  graph = cuda::Graph();  // the pool goes back to the shared cache
  EXPECT_EQ(cuda::allocator_stats(kGpu).graph_reserved_bytes, 0);
}

// The seed's custom loop (README "The custom loop"): eager against captured after two warm-up
// steps, batches copied into fixed inputs; the same bits.
TEST(CudaGraphTest, TheSeedsCustomLoopCapturedGivesTheEagerBits) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  clear_session();
  Model a = seed_mlp("loop_a"), b = seed_mlp("loop_b");
  b.set_weights(a.get_weights());
  auto opt_a = mixed_precision::LossScaleOptimizer(optimizers::RMSprop());
  auto opt_b = mixed_precision::LossScaleOptimizer(optimizers::RMSprop());
  const losses::SparseCategoricalCrossentropy loss_object;
  const auto va = a.trainable_variables(), vb = b.trainable_variables();
  const Tensor x = zeros({32, 64}, {.device = kGpu});
  const Tensor y = zeros({32}, {.dtype = DType::int64, .device = kGpu});
  auto step_b = [&] {
    GradientTape tape;
    auto loss = loss_object(y, b(x, {.training = true}));
    auto grads = opt_b.get_unscaled_gradients(tape.gradient(opt_b.get_scaled_loss(loss), vb));
    opt_b.apply_gradients(grads, vb);
  };
  cuda::Graph graph;
  for (int step = 0; step < 12; ++step) {
    const auto [xb, yb] = batch(step, 32, step == 6);
    {
      GradientTape tape;
      auto loss = loss_object(yb, a(xb, {.training = true}));
      auto grads = opt_a.get_unscaled_gradients(tape.gradient(opt_a.get_scaled_loss(loss), va));
      opt_a.apply_gradients(grads, va);
    }
    cuda::copy_into(x, xb);
    cuda::copy_into(y, yb);
    if (step < 2) {
      step_b();
    } else {
      if (!graph.captured()) graph = cuda::Graph::capture(kGpu, step_b);
      graph.replay();
    }
  }
  EXPECT_EQ(weight_bits(a), weight_bits(b));
  EXPECT_EQ(opt_a.loss_scale(), opt_b.loss_scale());
  EXPECT_EQ(opt_b.skipped_steps(), 1);
}

TEST(CudaGraphTest, StepsThatCannotBeReplayedRunEagerlyAndSayWhy) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard guard("mixed_float16");
  clear_session();
  {
    Pair p{optimizers::Adam({.clipnorm = 1.0}), optimizers::Adam({.clipnorm = 1.0})};
    models::GraphedTrainStep graphed(*p.cg, false);
    for (int step = 0; step < 6; ++step) {
      const auto [x, y] = batch(step, 32);
      models::train_step(*p.ce, x, y, {1, step + 1});
      graphed.run(x, y, {1, step + 1});
    }
    EXPECT_FALSE(graphed.graphed());
    ASSERT_EQ(graphed.reasons().size(), 1u);
    EXPECT_NE(graphed.reasons()[0].find("clips by norm"), std::string::npos);
    EXPECT_EQ(weight_bits(p.eager), weight_bits(p.graphed));
  }
  clear_session();
  {
    ASSERT_EQ(setenv("MIXPREC_CUDA_GRAPHS", "0", 1), 0);
    Pair p{optimizers::RMSprop(), optimizers::RMSprop()};
    models::GraphedTrainStep graphed(*p.cg, false);
    unsetenv("MIXPREC_CUDA_GRAPHS");
    for (int step = 0; step < 5; ++step) {
      const auto [x, y] = batch(step, 32);
      graphed.run(x, y, {1, step + 1});
    }
    EXPECT_FALSE(graphed.graphed());
    ASSERT_EQ(graphed.reasons().size(), 1u);
    EXPECT_EQ(graphed.reasons()[0], "MIXPREC_CUDA_GRAPHS=0");
  }
  clear_session();
  {
    Pair p{optimizers::RMSprop(), optimizers::RMSprop()};
    models::GraphedTrainStep graphed(*p.cg, false);
    for (int step = 0; step < 4; ++step) {
      const auto [x, y] = batch(step, 32);
      graphed.run(x, y, {1, step + 1});
    }
    graphed.invalidate("a callback reads the weights");
    const auto [x, y] = batch(9, 32);
    graphed.run(x, y, {1, 5});
    EXPECT_EQ(graphed.replays(), 2);
    EXPECT_EQ(graphed.eager_steps(), 3);
  }
}

}  // namespace
}  // namespace mixprec::testing
