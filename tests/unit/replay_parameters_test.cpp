// The per-step values of a step captured as a CUDA graph (src/core/replay_parameters.h) where they
// can run without a GPU: the buffer's bookkeeping (addresses, capacity, draws found by value, the
// recomputation order, the CPU upload); the optimizers' recorded update constants, which every
// emulated replay must rewrite with the constants the eager step of that iteration uses (Adam,
// AdamW with an exclusion under a warm-up schedule that starts at 0, a decaying schedule); the
// Dropout layers' (and the attention's) recorded draws, which every emulated replay must redraw as
// the eager step does, leaving the generators where eager steps leave them; and GraphedTrainStep's
// post-capture check (check_recorded_step), which must refuse unrecorded draws. A CPU buffer stands
// for the device buffer: the CPU runs what it records at once, reading the constants from it. The
// replays themselves: tests/gpu/cuda_graph_test.cpp.
#include "core/replay_parameters.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/kernel_math/training.h"
#include "mixprec/mixprec.h"
#include "models/graphed_step.h"
#include "models/model_impl.h"
#include "optimizers/optimizer_impl.h"
#include "optimizers/update_constants.h"

namespace mixprec {
namespace {

using core::ReplayParameters;
using core::ReplayRecording;

Tensor buffer() { return zeros({ReplayParameters::kWords}, {.dtype = DType::int64}); }

std::uint64_t word_at(const Tensor& buf, std::size_t i) {
  std::uint64_t w = 0;
  std::memcpy(&w, static_cast<const char*>(Tensor(buf).data_ptr()) + i * 8, 8);
  return w;
}

TEST(ReplayParametersTest, ValuesGetConsecutiveWordsAndAreRecomputedInRecordOrder) {
  const Tensor buf = buffer();
  ReplayParameters p(buf);
  EXPECT_EQ(ReplayParameters::active(), nullptr);
  std::vector<std::string> order;
  struct Three {
    float a, b, c;  // 12 bytes: two words
  };
  int next = 1;
  const Three* t = p.record_value<Three>({1.0f, 2.0f, 3.0f}, [&] {
    order.push_back("three");
    const float f = static_cast<float>(++next);
    return Three{f, f, f};
  });
  Generator g(99), twin(99);
  const std::uint64_t key = g.next_u64();
  p.record_draw(g, key);
  const char* base = static_cast<const char*>(buf.data_ptr());
  EXPECT_EQ(reinterpret_cast<const char*>(t), base);
  EXPECT_EQ(reinterpret_cast<const char*>(p.draw_address(key)), base + 16);
  EXPECT_EQ(p.draw_address(key + 1), nullptr) << "a value no draw gave: passed by value";
  EXPECT_EQ(p.values(), 2u);
  EXPECT_EQ(p.draws(), 1u);
  ASSERT_EQ(p.words().size(), 3u);
  EXPECT_EQ(p.words()[2], key);
  // A CPU buffer holds the recorded values at once.
  EXPECT_EQ(t->a, 1.0f);
  EXPECT_EQ(t->c, 3.0f);
  EXPECT_EQ(word_at(buf, 2), key);
  EXPECT_EQ(twin.next_u64(), key);
  std::uint64_t uploaded = key;
  for (int replay = 0; replay < 3; ++replay) {
    p.refresh();
    const std::uint64_t expected = twin.next_u64();
    EXPECT_EQ(p.words()[2], expected) << "each refresh draws the generator's next key";
    EXPECT_EQ(word_at(buf, 2), uploaded) << "nothing reaches the buffer before upload()";
    p.upload();
    uploaded = expected;
    EXPECT_EQ(word_at(buf, 2), expected);
    EXPECT_EQ(t->a, static_cast<float>(replay + 2));
  }
  EXPECT_EQ(order.size(), 3u);
  EXPECT_EQ(p.uploads(), 3);
  p.upload();
  EXPECT_EQ(p.uploads(), 3) << "the same values again: nothing written";
  EXPECT_TRUE(p.failure().empty());
  EXPECT_EQ(g.state().words, twin.state().words);
}

TEST(ReplayParametersTest, AFullBufferOrATwiceDrawnValueFailsTheStep) {
  {
    ReplayParameters p(buffer());
    std::vector<std::uint64_t> many(ReplayParameters::kWords, 7);
    EXPECT_NE(p.record(many, [](std::span<std::uint64_t>) {}), nullptr);
    const std::uint64_t one[1] = {1};
    EXPECT_EQ(p.record(one, [](std::span<std::uint64_t>) {}), nullptr);
    EXPECT_NE(p.failure().find("more than the 256 words"), std::string::npos) << p.failure();
  }
  {
    ReplayParameters p(buffer());
    Generator g(1);
    p.record_draw(g, 42);
    EXPECT_TRUE(p.failure().empty());
    p.record_draw(g, 42);
    EXPECT_NE(p.failure().find("same value"), std::string::npos) << p.failure();
  }
  EXPECT_THROW(ReplayParameters(zeros({4}, {.dtype = DType::int64})), ValueError);
  EXPECT_THROW(ReplayParameters(zeros({ReplayParameters::kWords})), ValueError);
}

TEST(ReplayParametersTest, ARecordingIsThisThreadsAndDoesNotNest) {
  ReplayParameters p(buffer()), q(buffer());
  {
    const ReplayRecording r(p);
    EXPECT_EQ(ReplayParameters::active(), &p);
    EXPECT_THROW(ReplayRecording{q}, std::logic_error);
  }
  EXPECT_EQ(ReplayParameters::active(), nullptr);
}

// ---- the optimizers' update constants ----

Tensor f32(const std::vector<double>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = kFloat32});
}
std::vector<double> gradient_at(int k, std::size_t n, double phase) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::cos(phase + 1.1 * i + 0.9 * k) * (0.5 + i);
  return g;
}
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() &&
         std::memcmp(Tensor(a).data_ptr(), Tensor(b).data_ptr(), a.nbytes()) == 0;
}
bool same_constants(const kernel_math::UpdateConstants& a, const kernel_math::UpdateConstants& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

struct OptimizerCase {
  std::string name;
  std::function<optimizers::Optimizer()> make;
  // The constants of the eager step at iteration k (count before the step), computed here from
  // update_constants.h, independently of SlotOptimizer.
  std::function<kernel_math::UpdateConstants(std::int64_t)> expected;
  bool exclude_first = false;
};

std::vector<OptimizerCase> optimizer_cases() {
  const optimizers::schedules::ExponentialDecay decay{
      .initial_learning_rate = 0.05, .decay_steps = 7, .decay_rate = 0.5};
  // From 0: captured at iteration 0 (below), AdamW's decay (weight_decay * lr) is 0 there and not
  // later, so the recorded step must split the excluded variable off even then.
  const optimizers::schedules::CosineDecay warmup{
      .initial_learning_rate = 0.0, .decay_steps = 100, .warmup_target = 0.02, .warmup_steps = 5};
  return {
      {"Adam",
       [] { return optimizers::Adam({.learning_rate = 0.01, .beta_1 = 0.8, .beta_2 = 0.95}); },
       [](std::int64_t k) {
         return optimizers::detail::adam_rule(0.01, k, 0.8, 0.95, 1e-7, 0.0).constants;
       }},
      {"Adam with a schedule", [decay] { return optimizers::Adam({.learning_rate = decay}); },
       [decay](std::int64_t k) {
         return optimizers::detail::adam_rule(decay(k), k, 0.9, 0.999, 1e-7, 0.0).constants;
       }},
      {"AdamW with an exclusion and a warm-up from 0",
       [warmup] { return optimizers::AdamW({.learning_rate = warmup, .weight_decay = 0.5}); },
       [warmup](std::int64_t k) {
         return optimizers::detail::adam_rule(warmup(k), k, 0.9, 0.999, 1e-7, 0.5).constants;
       },
       true},
      {"SGD with clipvalue",
       [] { return optimizers::SGD({.learning_rate = 0.1, .momentum = 0.9, .clipvalue = 0.5}); },
       [](std::int64_t) {
         kernel_math::UpdateConstants c = optimizers::detail::sgd_rule(0.1, 0.9, false).constants;
         c.clip_limit = 0.5f;
         return c;
       }},
  };
}

// Two optimizers on equal variables: `eager` steps every iteration; `graphed` steps eagerly for
// the warm-up, then once recorded (the capture: on the CPU it runs at once, reading its constants
// from the buffer), then only its host side runs per replay (advance_host_state and upload, as
// GraphedTrainStep::replay). Every replay's buffer must hold the constants of the eager step of
// that iteration, and the recorded step must have given the eager bits.
TEST(ReplayParametersTest, EveryReplayGetsTheUpdateConstantsOfTheEagerStep) {
  for (const OptimizerCase& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    optimizers::Optimizer eager = c.make(), graphed = c.make();
    const Tensor ea = f32({0.5, -1.25, 2.0, 0.1}), eb = f32({3.0, -0.75, 1.5});
    const Tensor ga = f32({0.5, -1.25, 2.0, 0.1}), gb = f32({3.0, -0.75, 1.5});
    if (c.exclude_first) {
      eager.exclude_from_weight_decay({ea});
      graphed.exclude_from_weight_decay({ga});
    }
    const auto grads = [](int k) {
      return std::vector<Tensor>{f32(gradient_at(k, 4, 0.4)), f32(gradient_at(k, 3, 1.3))};
    };
    const int capture_at = c.exclude_first ? 0 : 2;  // AdamW: at lr 0, where its decay is 0
    const Tensor buf = buffer();
    ReplayParameters p(buf);
    const auto* recorded = static_cast<const char*>(buf.data_ptr());
    for (int k = 0; k < 50; ++k) {
      eager.apply_gradients(grads(k), {ea, eb});
      if (k < capture_at) {
        graphed.apply_gradients(grads(k), {ga, gb});
      } else if (k == capture_at) {
        {
          const ReplayRecording recording(p);
          graphed.apply_gradients(grads(k), {ga, gb});
        }
        ASSERT_EQ(p.values(), 1u);
        EXPECT_TRUE(same_bits(ea, ga)) << "the recorded step gives the eager bits";
        EXPECT_TRUE(same_bits(eb, gb));
      } else {
        models::advance_host_state(p, *graphed.impl());
        p.upload();
      }
      if (k < capture_at) continue;
      using Constants = optimizers::detail::SlotOptimizer::StepConstants;
      Constants in_buffer;
      std::memcpy(&in_buffer, recorded, sizeof in_buffer);
      kernel_math::UpdateConstants undecayed = c.expected(k);
      undecayed.decay = 0.0f;
      EXPECT_TRUE(same_constants(in_buffer.decayed, c.expected(k))) << "iteration " << k;
      EXPECT_TRUE(same_constants(in_buffer.undecayed, undecayed)) << "iteration " << k;
      EXPECT_EQ(graphed.iterations(), eager.iterations());
    }
    // The bias correction (or the schedule) did change what the buffer holds.
    if (c.name != "SGD with clipvalue") {
      EXPECT_FALSE(same_constants(c.expected(capture_at), c.expected(49)));
    }
  }
}

// A learning rate set between steps (a callback's set_learning_rate) reaches the next replay's
// constants: the graph is not captured again.
TEST(ReplayParametersTest, ALearningRateSetBetweenReplaysReachesTheNextReplay) {
  optimizers::Optimizer eager = optimizers::Adam({.learning_rate = 0.01});
  optimizers::Optimizer graphed = optimizers::Adam({.learning_rate = 0.01});
  const Tensor ea = f32({0.5, -1.25}), ga = f32({0.5, -1.25});
  const Tensor buf = buffer();
  ReplayParameters p(buf);
  for (int k = 0; k < 20; ++k) {
    if (k == 9) {
      eager.set_learning_rate(0.004);
      graphed.set_learning_rate(0.004);
    }
    const std::vector<Tensor> g{f32(gradient_at(k, 2, 0.2))};
    eager.apply_gradients(g, {ea});
    if (k < 2) {
      graphed.apply_gradients(g, {ga});
      continue;
    }
    if (k == 2) {
      const ReplayRecording recording(p);
      graphed.apply_gradients(g, {ga});
    } else {
      models::advance_host_state(p, *graphed.impl());
      p.upload();
    }
    kernel_math::UpdateConstants in_buffer;
    std::memcpy(&in_buffer, buf.data_ptr(), sizeof in_buffer);
    const double lr = k < 9 ? 0.01 : 0.004;
    EXPECT_TRUE(same_constants(
        in_buffer, optimizers::detail::adam_rule(lr, k, 0.9, 0.999, 1e-7, 0.0).constants))
        << "iteration " << k;
  }
}

// The CPU update reads a rule's constants from memory when it points there, and only then.
TEST(ReplayParametersTest, AnUpdateRunsWithTheConstantsInMemoryWhereTheRulePointsThere) {
  const kernel_math::UpdateConstants launched =
      optimizers::detail::sgd_rule(0.5, 0.0, false).constants;
  const kernel_math::UpdateConstants in_memory =
      optimizers::detail::sgd_rule(0.25, 0.0, false).constants;
  EXPECT_TRUE(same_constants(kernel_math::constants_to_use(launched, nullptr), launched));
  EXPECT_TRUE(same_constants(kernel_math::constants_to_use(launched, &in_memory), in_memory));
}

// ---- Dropout's draws ----

Generator& own_generator(const layers::Layer& layer) { return *layer.impl().own_generator(); }

TEST(ReplayParametersTest, EveryReplayRedrawsTheDropoutKeysOfTheEagerStep) {
  set_seed(3);
  const layers::Dropout seeded(0.5, {.seed = 7}), unseeded(0.3);
  const Tensor x = ones({4, 16});
  Generator twin_seeded(7);
  Generator twin_default;
  twin_default.set_state(default_generator().state());
  const Tensor buf = buffer();
  ReplayParameters p(buf);
  optimizers::SGD sgd;
  const std::vector<models::GeneratorSnapshot> before{
      {&default_generator(), default_generator().state()},
      {&own_generator(seeded), own_generator(seeded).state()}};
  {
    const ReplayRecording recording(p);
    (void)unseeded(seeded(x, {.training = true}), {.training = true});
  }
  sgd.impl()->set_iterations(1);  // the step's count, as the optimizer step would leave it
  ASSERT_EQ(p.draws(), 2u);
  const std::uint64_t k1 = twin_seeded.next_u64(), k2 = twin_default.next_u64();
  ASSERT_EQ(p.words(), (std::vector<std::uint64_t>{k1, k2}));
  EXPECT_EQ(reinterpret_cast<const char*>(p.draw_address(k2)),
            static_cast<const char*>(buf.data_ptr()) + 8);
  const std::vector<models::GeneratorSnapshot> after{
      {&default_generator(), default_generator().state()},
      {&own_generator(seeded), own_generator(seeded).state()}};
  EXPECT_EQ(models::check_recorded_step(p, before, after, *sgd.impl(), 0), "");
  EXPECT_TRUE(models::same_state(default_generator().state(), after[0].state));
  EXPECT_TRUE(models::same_state(own_generator(seeded).state(), after[1].state));
  EXPECT_EQ(sgd.iterations(), 1);
  for (int replay = 0; replay < 5; ++replay) {
    models::advance_host_state(p, *sgd.impl());
    p.upload();
    const std::uint64_t e1 = twin_seeded.next_u64(), e2 = twin_default.next_u64();
    EXPECT_EQ(word_at(buf, 0), e1);
    EXPECT_EQ(word_at(buf, 1), e2);
  }
  // After 1 + 5 steps every generator is where 6 eager steps leave it.
  EXPECT_TRUE(models::same_state(own_generator(seeded).state(), twin_seeded.state()));
  EXPECT_TRUE(models::same_state(default_generator().state(), twin_default.state()));
  EXPECT_EQ(sgd.iterations(), 6);
  // And the eager Dropout at that point draws what the twin does next.
  EXPECT_EQ(own_generator(seeded).next_u64(), twin_seeded.next_u64());
}

// MultiHeadAttention draws its key from its generator (seeded) and ops::attention from the
// default generator (no seed given): both recorded, both redrawn by each replay.
TEST(ReplayParametersTest, AttentionDropoutDrawsAreRecordedToo) {
  set_seed(6);
  const layers::MultiHeadAttention mha(2, 4, {.dropout = 0.25, .seed = 21});
  const Tensor x = random_uniform({2, 5, 8}, -1.0, 1.0);
  (void)mha(std::vector<Tensor>{x, x});  // builds the variables (no draw: not training)
  const Tensor q = random_uniform({1, 6, 2, 4}, -1.0, 1.0);
  Generator twin_mha(21);
  Generator twin_default;
  twin_default.set_state(default_generator().state());
  ReplayParameters p(buffer());
  optimizers::SGD sgd;
  const std::vector<models::GeneratorSnapshot> before{
      {&default_generator(), default_generator().state()},
      {&own_generator(mha), own_generator(mha).state()}};
  {
    const ReplayRecording recording(p);
    (void)mha(std::vector<Tensor>{x, x}, {.training = true});
    (void)scaled_dot_product_attention(q, q, q, {.dropout_rate = 0.1, .training = true});
    // A given seed is the same every step: nothing to record.
    (void)scaled_dot_product_attention(q, q, q, {.dropout_rate = 0.1, .training = true, .seed = 3});
  }
  sgd.impl()->set_iterations(1);
  ASSERT_EQ(p.draws(), 2u);
  EXPECT_EQ(p.words(), (std::vector<std::uint64_t>{twin_mha.next_u64(), twin_default.next_u64()}));
  const std::vector<models::GeneratorSnapshot> after{
      {&default_generator(), default_generator().state()},
      {&own_generator(mha), own_generator(mha).state()}};
  EXPECT_EQ(models::check_recorded_step(p, before, after, *sgd.impl(), 0), "");
  for (int replay = 0; replay < 3; ++replay) {
    models::advance_host_state(p, *sgd.impl());
    EXPECT_EQ(p.words(),
              (std::vector<std::uint64_t>{twin_mha.next_u64(), twin_default.next_u64()}));
  }
  EXPECT_TRUE(models::same_state(own_generator(mha).state(), twin_mha.state()));
  EXPECT_TRUE(models::same_state(default_generator().state(), twin_default.state()));
}

TEST(ReplayParametersTest, AStepWithADrawItDoesNotRecordIsRefused) {
  set_seed(4);
  const layers::Dropout dropout(0.5);
  ReplayParameters p(buffer());
  optimizers::SGD sgd;
  const std::vector<models::GeneratorSnapshot> before{
      {&default_generator(), default_generator().state()}};
  {
    const ReplayRecording recording(p);
    (void)dropout(ones({2, 8}), {.training = true});
    (void)default_generator().next_u64();  // a draw no layer records
  }
  const std::vector<models::GeneratorSnapshot> after{
      {&default_generator(), default_generator().state()}};
  const std::string why = models::check_recorded_step(p, before, after, *sgd.impl(), 0);
  EXPECT_NE(why.find("does not record"), std::string::npos) << why;
  EXPECT_TRUE(models::same_state(default_generator().state(), after[0].state))
      << "the generators are left where the step left them";

  // A draw of a generator the check does not know of: refused before anything is redrawn.
  Generator stray(5);
  const GeneratorState stray_before = stray.state();
  ReplayParameters q(buffer());
  {
    const ReplayRecording recording(q);
    EXPECT_EQ(q.draw(stray), Generator(5).next_u64());
  }
  const GeneratorState stray_after = stray.state();
  EXPECT_NE(models::check_recorded_step(q, after, after, *sgd.impl(), 0).find("generator"),
            std::string::npos);
  EXPECT_TRUE(models::same_state(stray.state(), stray_after));
  // What GraphedTrainStep's undo does then: every generator drawn from is set back.
  q.restore_generators();
  EXPECT_TRUE(models::same_state(stray.state(), stray_before));
  EXPECT_FALSE(models::same_state(stray_after, stray_before));
}

}  // namespace
}  // namespace mixprec
