// applications::gpt: the graph (layer names, shapes, dtypes, parameter count against GPT-2's
// formula), the presets and option errors, training that learns (loss falls under three
// policies), the key-value-cache decoder against the model's own forward pass, greedy and sampled
// generation, and a checkpoint that continues training bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/memory.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

namespace app = applications;
using testing::expect_error;
using testing::PolicyGuard;
using testing::TempDir;

app::GptConfig tiny(int layers = 2) {
  return {.layers = layers, .width = 32, .heads = 4, .context = 16, .vocab = 23};
}

// (n, t) int32 windows of a sequence with a learnable rule (next = (3 * cur + 1) mod vocab), and
// the targets shifted by one.
std::pair<Tensor, Tensor> pattern_windows(std::int64_t n, std::int64_t t, std::int64_t vocab) {
  std::vector<std::int32_t> x, y;
  for (std::int64_t s = 0; s < n; ++s) {
    std::int64_t cur = (s * 7) % vocab;
    for (std::int64_t i = 0; i < t; ++i) {
      x.push_back(static_cast<std::int32_t>(cur));
      cur = (3 * cur + 1) % vocab;
      y.push_back(static_cast<std::int32_t>(cur));
    }
  }
  return {from_vector(x, {n, t}), from_vector(y, {n, t})};
}

std::vector<float> to_floats(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::float32).contiguous().to_vector<float>();
}

TEST(GptTest, GraphShapesDtypesAndParameters) {
  PolicyGuard policy(mixed_precision::Policy("mixed_bfloat16"));
  const app::GptConfig c = tiny();
  Model m = app::gpt(c);
  EXPECT_EQ(m.inputs()[0].shape(), (PartialShape{-1, -1}));
  EXPECT_EQ(m.inputs()[0].dtype(), DType::int32);
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, -1, c.vocab}));
  EXPECT_EQ(m.outputs()[0].dtype(), DType::bfloat16);  // logits in the compute dtype
  // GPT-2's count: tables, per block 2 LayerNorms (4C), attention 4 (C^2 + C), MLP 8C^2 + 5C;
  // the final LayerNorm. The head is tied: no extra weights.
  const std::int64_t C = c.width, L = c.layers;
  EXPECT_EQ(m.count_params(), c.vocab * C + c.context * C +
                                  L * (4 * C + 4 * (C * C + C) + 8 * C * C + 5 * C) + 2 * C);
  for (const layers::NamedVariable& v : m.named_variables()) {
    EXPECT_EQ(v.value.dtype(), DType::float32) << v.name;  // float32 masters
  }
  const Tensor ids = from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor logits = m(ids);
  EXPECT_EQ(logits.shape(), (Shape{2, 3, c.vocab}));
  EXPECT_EQ(logits.dtype(), DType::bfloat16);
  EXPECT_TRUE(all_finite(logits));
  // gpt_config() reads the configuration back.
  const app::GptConfig back = app::gpt_config(m);
  EXPECT_EQ(back.layers, c.layers);
  EXPECT_EQ(back.width, c.width);
  EXPECT_EQ(back.heads, c.heads);
  EXPECT_EQ(back.context, c.context);
  EXPECT_EQ(back.vocab, c.vocab);
  EXPECT_DOUBLE_EQ(back.layer_norm_epsilon, c.layer_norm_epsilon);
}

TEST(GptTest, PresetsAndErrors) {
  const app::GptConfig g2 = app::gpt_preset("gpt2");
  EXPECT_EQ(g2.layers, 12);
  EXPECT_EQ(g2.width, 768);
  EXPECT_EQ(g2.heads, 12);
  EXPECT_EQ(g2.context, 1024);
  EXPECT_EQ(g2.vocab, 50257);
  // GPT-2 small's 124,439,808 parameters, by the same count as above (without building it).
  const std::int64_t C = g2.width, L = g2.layers;
  EXPECT_EQ(
      g2.vocab * C + g2.context * C + L * (4 * C + 4 * (C * C + C) + 8 * C * C + 5 * C) + 2 * C,
      124439808);
  expect_error<ValueError>([] { app::gpt_preset("gpt5"); }, {"gpt5", "gpt2", "gpt-nano"});
  expect_error<ValueError>([] { app::gpt({.width = 30, .heads = 4}); }, {"width", "heads"});
  expect_error<ValueError>([] { app::gpt({.layers = 0}); }, {"layers"});
  expect_error<ValueError>([] { app::gpt({.dropout = 1.0}); }, {"dropout"});
  // A longer sequence than the context is refused by the position table.
  Model m = app::gpt(tiny(1));
  std::vector<std::int32_t> ids(17, 1);
  expect_error<ShapeError>([&] { m(from_vector(ids, {1, 17})); }, {"17", "16"});
}

TEST(GptTest, StepFlopsFollowTheAccounting) {
  const app::GptConfig c = tiny();
  const double tokens = 4.0 * 8.0;
  const double n = 12.0 * 2 * 32 * 32 + 23.0 * 32;
  EXPECT_DOUBLE_EQ(app::gpt_step_flops(c, 4, 8), 6 * tokens * n + 12 * tokens * 2 * 8 * 32);
}

// A few steps of AdamW on the pattern: the loss falls by a clear margin under every policy, and
// the loss scale of mixed_float16 stays finite.
TEST(GptTest, LearnsANextTokenRuleUnderEachPolicy) {
  for (const char* policy : {"float32", "mixed_bfloat16", "mixed_float16"}) {
    PolicyGuard guard{mixed_precision::Policy(policy)};
    set_seed(3);
    Model m = app::gpt(tiny());
    // The guard is in force: the logits come out in the policy's compute dtype.
    ASSERT_EQ(m.outputs()[0].dtype(), mixed_precision::Policy(policy).compute_dtype()) << policy;
    m.compile({.optimizer = optimizers::AdamW({.learning_rate = 3e-3}),
               .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
    const auto [x, y] = pattern_windows(32, 12, 23);
    const double first = m.evaluate(x, y, {.verbose = Verbosity::silent}).at("loss");
    m.fit(x, y, {.batch_size = 8, .epochs = 6, .verbose = Verbosity::silent});
    const double last = m.evaluate(x, y, {.verbose = Verbosity::silent}).at("loss");
    EXPECT_TRUE(std::isfinite(last)) << policy;
    EXPECT_LT(last, 0.5 * first) << policy << ": " << first << " -> " << last;
  }
}

// The decoder's logits for each position equal the model's forward pass over the whole prefix
// (float32; the decoder adds one position at a time to its cache).
TEST(GptTest, DecoderMatchesTheFullForwardPass) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  set_seed(5);
  Model m = app::gpt(tiny());
  const std::vector<std::int64_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  std::vector<std::int32_t> ids32(tokens.begin(), tokens.end());
  const Tensor full = m(from_vector(ids32, {1, static_cast<std::int64_t>(tokens.size())}));
  app::GptDecoder decoder(m);
  // The first three by prefill, the rest one by one.
  std::vector<Tensor> step_logits = {decoder.prefill({tokens[0], tokens[1], tokens[2]})};
  for (std::size_t i = 3; i < tokens.size(); ++i) step_logits.push_back(decoder.step(tokens[i]));
  EXPECT_EQ(decoder.position(), static_cast<std::int64_t>(tokens.size()));
  for (std::size_t k = 0; k < step_logits.size(); ++k) {
    const std::int64_t pos = static_cast<std::int64_t>(k == 0 ? 2 : k + 2);
    const std::vector<float> want = to_floats(slice(full, 1, pos, pos + 1));
    const std::vector<float> got = to_floats(step_logits[k]);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t j = 0; j < got.size(); ++j) {
      EXPECT_NEAR(got[j], want[j], 1e-5 + 1e-5 * std::abs(want[j])) << "position " << pos;
    }
  }
  expect_error<ValueError>([&] { decoder.step(23); }, {"23", "[0, 23)"});
  decoder.reset();
  EXPECT_EQ(decoder.position(), 0);
  std::vector<std::int64_t> too_long(17, 1);
  expect_error<ValueError>([&] { decoder.prefill(too_long); }, {"context"});
}

// Greedy generation equals choosing the argmax of a full forward pass over the growing sequence;
// sampling is repeatable by seed and stays in the vocabulary; top_k = 1 is greedy.
TEST(GptTest, GenerateGreedyAndSampled) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  set_seed(7);
  Model m = app::gpt(tiny());
  const std::vector<std::int64_t> prompt = {2, 7, 1};
  const auto greedy = app::generate(m, prompt, {.max_tokens = 8, .temperature = 0.0});
  ASSERT_EQ(greedy.size(), 11u);
  std::vector<std::int64_t> seq = prompt;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::int32_t> ids(seq.begin(), seq.end());
    const Tensor logits = m(from_vector(ids, {1, static_cast<std::int64_t>(ids.size())}));
    const std::int64_t t = static_cast<std::int64_t>(seq.size());
    seq.push_back(
        static_cast<std::int64_t>(argmax(reshape(slice(logits, 1, t - 1, t), {23}), 0).item()));
  }
  EXPECT_EQ(greedy, seq);
  const auto a = app::generate(m, prompt, {.max_tokens = 10, .temperature = 1.0, .seed = 11});
  const auto b = app::generate(m, prompt, {.max_tokens = 10, .temperature = 1.0, .seed = 11});
  const auto c = app::generate(m, prompt, {.max_tokens = 10, .temperature = 1.0, .seed = 12});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (std::int64_t id : a) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 23);
  }
  EXPECT_EQ(app::generate(m, prompt, {.max_tokens = 8, .temperature = 0.7, .top_k = 1}), greedy);
  // Past the context (16) the window slides: when the cache is full it restarts from the last 8
  // tokens. 40 greedy tokens equal the argmax of a full forward pass over that window each time.
  const auto slid = app::generate(m, prompt, {.max_tokens = 40, .temperature = 0.0});
  ASSERT_EQ(slid.size(), 43u);
  std::vector<std::int64_t> window_ref = prompt;
  std::size_t start = 0;
  while (window_ref.size() < slid.size()) {
    if (window_ref.size() - start > 16) start = window_ref.size() - 8;
    std::vector<std::int32_t> ids(window_ref.begin() + static_cast<std::ptrdiff_t>(start),
                                  window_ref.end());
    const auto t = static_cast<std::int64_t>(ids.size());
    const Tensor logits = m(from_vector(ids, {1, t}));
    window_ref.push_back(
        static_cast<std::int64_t>(argmax(reshape(slice(logits, 1, t - 1, t), {23}), 0).item()));
  }
  EXPECT_EQ(slid, window_ref);
  // Generation stops at the stop token.
  const auto stopped =
      app::generate(m, prompt, {.max_tokens = 8, .temperature = 0.0, .stop_token = greedy[3]});
  EXPECT_EQ(stopped.back(), greedy[3]);
  EXPECT_EQ(stopped.size(), 4u);
  expect_error<ValueError>([&] { app::generate(m, {}, {}); }, {"prompt"});
  expect_error<ValueError>([&] { app::generate(m, prompt, {.temperature = -1}); }, {"temperature"});
  expect_error<ValueError>([&] { app::generate(m, prompt, {.top_k = -2}); }, {"top_k"});
}

// A checkpoint taken after two epochs and loaded into a fresh model continues to the same
// weights, bit for bit, as the run that was never interrupted (mixed_bfloat16, AdamW).
TEST(GptTest, CheckpointContinuesTrainingExactly) {
  PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  const auto [x, y] = pattern_windows(16, 8, 23);
  auto make = [] {
    set_seed(9);
    Model m = app::gpt(tiny());
    m.compile({.optimizer = optimizers::AdamW({.learning_rate = 1e-3}),
               .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
    return m;
  };
  Model straight = make();
  straight.fit(x, y,
               {.batch_size = 4, .epochs = 2, .verbose = Verbosity::silent, .shuffle = false});
  TempDir dir;
  io::save_checkpoint(straight, dir.file("half.safetensors"));
  straight.fit(x, y,
               {.batch_size = 4, .epochs = 2, .verbose = Verbosity::silent, .shuffle = false});

  Model resumed = make();
  io::load_checkpoint(resumed, dir.file("half.safetensors"));
  resumed.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = Verbosity::silent, .shuffle = false});
  const auto a = straight.named_variables(), b = resumed.named_variables();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(to_floats(a[i].value), to_floats(b[i].value)) << a[i].name;
  }
}

// The fused attention never keeps the T x T probabilities: a training step over the same number
// of tokens (batch x T = 2048) at T = 512, 1024 and 2048 peaks within 1.2x of the T = 512 step
// (the composition's probabilities alone would grow 4x from one to the next).
TEST(GptTest, PeakMemoryOfATrainingStepIsLinearInT) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  set_seed(12);
  Model m = app::gpt({.layers = 1, .width = 32, .heads = 2, .context = 2048, .vocab = 64});
  m.compile({.optimizer = optimizers::AdamW(),
             .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  std::vector<std::int64_t> peaks;
  for (std::int64_t t : {512, 1024, 2048}) {
    const std::int64_t b = 2048 / t;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(b * t));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 37) % 64);
    const Tensor x = from_vector(ids, {b, t});
    m.train_on_batch(x, x);  // slots exist from here on: every measured step has the same state
    reset_peak_memory_stats(Device::cpu());
    m.train_on_batch(x, x);
    peaks.push_back(memory_stats(Device::cpu()).peak_bytes);
  }
  EXPECT_LT(static_cast<double>(peaks[1]), 1.2 * static_cast<double>(peaks[0]));
  EXPECT_LT(static_cast<double>(peaks[2]), 1.2 * static_cast<double>(peaks[0]))
      << peaks[0] << " " << peaks[1] << " " << peaks[2];
}

// model.save / load_model round-trips the GPT (its layers' configs, the tied head's two calls):
// the loaded model gives the same logits bit for bit.
TEST(GptTest, SavedModelLoadsBack) {
  PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  set_seed(4);
  Model m = app::gpt(tiny());
  TempDir dir;
  m.save(dir.path() / "gpt");
  Model again = load_model(dir.path() / "gpt");
  const Tensor ids = from_vector(std::vector<std::int32_t>{5, 4, 3, 2, 1}, {1, 5});
  EXPECT_EQ(to_floats(m(ids)), to_floats(again(ids)));
  EXPECT_EQ(app::gpt_config(again).layers, 2);
}

}  // namespace
}  // namespace mixprec
