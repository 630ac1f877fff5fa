// CompileOptions::steps_per_execution (Keras's): fit(), evaluate() and predict() run N batches per
// execution. The training is the same for every N (bit for bit on the CPU: weights, History and
// the loss-scale trajectory, under three policies); the batch hooks fire once per execution,
// begin with its first batch and end with its last, the last execution of an epoch shorter; the
// "every N batches" frequencies of ModelCheckpoint, BackupAndRestore and TensorBoard count batches
// (Keras's rule); the value is saved with the compile settings.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using testing::blobs;
using testing::tiny_model;

// Every hook as "train_begin 3", "train_end 7", "test_begin 0", ... plus the loss scale each
// training batch end saw.
struct Cadence : callbacks::Callback {
  std::vector<std::string> events;
  std::vector<std::pair<std::int64_t, double>> loss_scales;  // (global batch, scale)
  int epoch = 0;

  void on_epoch_begin(int e, const callbacks::Logs&) override {
    epoch = e;
    events.push_back("epoch " + std::to_string(e));
  }
  void on_train_batch_begin(std::int64_t b, const callbacks::Logs&) override {
    events.push_back("train_begin " + std::to_string(b));
  }
  void on_train_batch_end(std::int64_t b, const callbacks::Logs& logs) override {
    events.push_back("train_end " + std::to_string(b));
    if (const std::optional<double> s = logs.get("loss_scale")) {
      loss_scales.emplace_back(epoch * 1000 + b, *s);
    }
  }
  void on_test_batch_begin(std::int64_t b, const callbacks::Logs&) override {
    events.push_back("test_begin " + std::to_string(b));
  }
  void on_test_batch_end(std::int64_t b, const callbacks::Logs&) override {
    events.push_back("test_end " + std::to_string(b));
  }
  void on_predict_begin(const callbacks::Logs&) override { events.push_back("predict"); }
  void on_predict_batch_begin(std::int64_t b, const callbacks::Logs&) override {
    events.push_back("predict_begin " + std::to_string(b));
  }
  void on_predict_batch_end(std::int64_t b, const callbacks::Logs&) override {
    events.push_back("predict_end " + std::to_string(b));
  }
  void on_predict_end(const callbacks::Logs&) override { events.push_back("predict_done"); }
};

struct TrainedRun {
  std::vector<std::vector<unsigned char>> weights;  // the bytes of every variable
  History history;
  std::shared_ptr<Cadence> cadence = std::make_shared<Cadence>();
  double final_scale = 0.0;
  std::int64_t iterations = 0;
};

// The tiny model with dropout trained 3 epochs on 157 samples, 0.1 held out for validation: 18
// shuffled training batches of 8 per epoch. Under mixed_float16 the loss scale starts at 2^30
// (float16 overflows: skipped steps and halvings) and grows every 3 steps, so its trajectory moves
// up and down during the run.
TrainedRun train(std::int64_t steps_per_execution) {
  const testing::TinyData d = blobs(157, 5);
  Model m = tiny_model(11, /*dropout=*/true);
  optimizers::Optimizer opt = optimizers::Adam({.learning_rate = 0.01});
  if (mixed_precision::global_policy().name() == "mixed_float16") {
    opt = mixed_precision::LossScaleOptimizer(
        opt, {.initial_scale = 1073741824.0, .dynamic_growth_steps = 3});
  }
  m.compile({.optimizer = opt,
             .loss = std::string("sparse_categorical_crossentropy"),
             .metrics = {std::string("accuracy")},
             .steps_per_execution = steps_per_execution});
  TrainedRun r;
  r.history = m.fit(d.x, d.y,
                    {.batch_size = 8,
                     .epochs = 3,
                     .verbose = Verbosity::silent,
                     .validation_split = 0.1,
                     .seed = 3,
                     .callbacks = {r.cadence}});
  for (const Tensor& v : m.variables()) {
    const Tensor c = v.to(Device::cpu()).contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    r.weights.emplace_back(p, p + c.nbytes());
  }
  r.iterations = m.optimizer().iterations();
  if (auto lso = mixed_precision::as_loss_scale_optimizer(m.optimizer())) {
    r.final_scale = lso->loss_scale();
  }
  return r;
}

class StepsPerExecutionTest : public ::testing::TestWithParam<const char*> {};

TEST_P(StepsPerExecutionTest, TrainsBitForBitAsOneBatchPerExecution) {
  testing::PolicyGuard policy{mixed_precision::Policy(GetParam())};
  ASSERT_EQ(mixed_precision::global_policy().name(), GetParam());
  const TrainedRun one = train(1);
  const TrainedRun sixteen = train(16);
  ASSERT_EQ(one.weights.size(), sixteen.weights.size());
  for (std::size_t i = 0; i < one.weights.size(); ++i) {
    EXPECT_EQ(one.weights[i], sixteen.weights[i]) << "variable " << i;
  }
  EXPECT_EQ(one.iterations, sixteen.iterations);
  ASSERT_EQ(one.history.epochs.size(), 3u);
  ASSERT_EQ(sixteen.history.epochs.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(one.history.epochs[e].metrics, sixteen.history.epochs[e].metrics) << "epoch " << e;
    EXPECT_EQ(one.history.epochs[e].loss_scale, sixteen.history.epochs[e].loss_scale);
    EXPECT_EQ(one.history.epochs[e].skipped_steps, sixteen.history.epochs[e].skipped_steps);
  }
  EXPECT_EQ(one.final_scale, sixteen.final_scale);
  // The loss-scale trajectory: at every batch the 16-batch run reports, the same scale as the
  // one-batch run's at that batch.
  std::map<std::int64_t, double> every;
  for (const auto& [batch, scale] : one.cadence->loss_scales) every[batch] = scale;
  if (std::string(GetParam()) == "mixed_float16") {
    ASSERT_EQ(one.cadence->loss_scales.size(), 3u * 18u);  // 18 training batches per epoch
    ASSERT_EQ(sixteen.cadence->loss_scales.size(), 3u * 2u);
    std::set<double> distinct;
    for (const auto& [batch, scale] : one.cadence->loss_scales) distinct.insert(scale);
    EXPECT_GT(distinct.size(), 3u) << "the scale should move during the run";
    EXPECT_GT(one.history.epochs[0].skipped_steps, 0) << "2^30 overflows float16";
  }
  for (const auto& [batch, scale] : sixteen.cadence->loss_scales) {
    ASSERT_TRUE(every.contains(batch)) << batch;
    EXPECT_EQ(every[batch], scale) << "batch " << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, StepsPerExecutionTest,
                         ::testing::Values("float32", "mixed_bfloat16", "mixed_float16"));

// 18 training batches per epoch: executions of 16 and 2; the validation's 2 batches are one
// execution.
TEST(StepsPerExecution, BatchHooksFireOncePerExecutionTheLastShorter) {
  const TrainedRun r = train(16);
  const std::vector<std::string> epoch = {"train_begin 0", "train_end 15", "train_begin 16",
                                          "train_end 17",  "test_begin 0", "test_end 1"};
  std::vector<std::string> want;
  for (int e = 0; e < 3; ++e) {
    want.push_back("epoch " + std::to_string(e));
    want.insert(want.end(), epoch.begin(), epoch.end());
  }
  EXPECT_EQ(r.cadence->events, want);
}

TEST(StepsPerExecution, OneBatchPerExecutionFiresEveryBatch) {
  const TrainedRun r = train(1);
  std::int64_t begins = 0, ends = 0;
  for (const std::string& e : r.cadence->events) {
    begins += e.rfind("train_begin ", 0) == 0;
    ends += e.rfind("train_end ", 0) == 0;
  }
  EXPECT_EQ(begins, 3 * 18);
  EXPECT_EQ(ends, 3 * 18);
}

TEST(StepsPerExecution, EvaluateAndPredictRunExecutions) {
  const testing::TinyData d = blobs(50, 7);
  Model m = tiny_model(3);
  m.compile({.optimizer = optimizers::SGD(),
             .loss = std::string("sparse_categorical_crossentropy"),
             .steps_per_execution = 3});
  auto cadence = std::make_shared<Cadence>();
  const Scores scores =
      m.evaluate(d.x, d.y, {.batch_size = 8, .verbose = Verbosity::silent, .callbacks = {cadence}});
  // 7 batches: executions of 3, 3 and 1.
  EXPECT_EQ(cadence->events,
            (std::vector<std::string>{"test_begin 0", "test_end 2", "test_begin 3", "test_end 5",
                                      "test_begin 6", "test_end 6"}));
  cadence->events.clear();
  const Tensor out = m.predict(d.x, {.batch_size = 8, .callbacks = {cadence}});
  EXPECT_EQ(cadence->events,
            (std::vector<std::string>{"predict", "predict_begin 0", "predict_end 2",
                                      "predict_begin 3", "predict_end 5", "predict_begin 6",
                                      "predict_end 6", "predict_done"}));
  // The same results as one batch per execution.
  Model same = tiny_model(3);
  same.compile(
      {.optimizer = optimizers::SGD(), .loss = std::string("sparse_categorical_crossentropy")});
  EXPECT_EQ(same.evaluate(d.x, d.y, {.batch_size = 8, .verbose = Verbosity::silent}).values,
            scores.values);
  const Tensor want = same.predict(d.x, {.batch_size = 8});
  ASSERT_EQ(want.shape(), out.shape());
  EXPECT_EQ(std::memcmp(want.data_ptr(), out.data_ptr(), out.nbytes()), 0);
}

// Keras's count: an execution adds its batches; reaching save_freq saves and starts again from
// zero. 18 batches per epoch in executions of 4 (4, 4, 4, 4, 2), save_freq 6: the count reaches 8
// at batch 7 (save), 8 at batch 15 (save), 2 at 17, 6 at the next epoch's batch 3 (save), ...
TEST(StepsPerExecution, SaveFrequencyCountsBatches) {
  testing::TempDir dir;
  const testing::TinyData d = blobs(157, 5);
  Model m = tiny_model(11);
  m.compile({.optimizer = optimizers::SGD(),
             .loss = std::string("sparse_categorical_crossentropy"),
             .steps_per_execution = 4});
  (void)m.fit(d.x, d.y,
              {.batch_size = 8,
               .epochs = 2,
               .verbose = Verbosity::silent,
               .validation_split = 0.1,
               .callbacks = {callbacks::ModelCheckpoint(
                   {.filepath = (dir.path() / "w-{epoch}-{batch}.weights.safetensors").string(),
                    .save_weights_only = true,
                    .save_freq = std::int64_t{6}})}});
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.insert(entry.path().filename().string());
  }
  // {batch} is 1-based: batch index 7 is "8".
  EXPECT_EQ(files, (std::set<std::string>{"w-1-8.weights.safetensors", "w-1-16.weights.safetensors",
                                          "w-2-4.weights.safetensors", "w-2-12.weights.safetensors",
                                          "w-2-18.weights.safetensors"}));
}

TEST(StepsPerExecution, SavedWithTheCompileSettings) {
  Model m = tiny_model(1);
  m.compile({.optimizer = optimizers::SGD(),
             .loss = std::string("sparse_categorical_crossentropy"),
             .steps_per_execution = 16});
  const std::string config = compile_config_to_json(m);
  EXPECT_NE(config.find("\"steps_per_execution\":16"), std::string::npos) << config;
  EXPECT_EQ(compile_options_from_json(config).steps_per_execution, 16);
  // Settings saved before the field existed: one batch per execution.
  std::string old = config;
  old.replace(old.find(",\"steps_per_execution\":16"), 25, "");
  EXPECT_EQ(compile_options_from_json(old).steps_per_execution, 1) << old;
  for (const std::string bad : {"0", "-2", "1.5", "\"16\"", "null"}) {
    std::string text = config;
    text.replace(text.find("16}"), 2, bad);
    try {
      (void)compile_options_from_json(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("steps_per_execution"), std::string::npos) << e.what();
    }
  }
  // Through Model::save and load_model.
  testing::TempDir dir;
  m.save(dir.path() / "model");
  Model loaded = load_model(dir.path() / "model");
  EXPECT_NE(compile_config_to_json(loaded).find("\"steps_per_execution\":16"), std::string::npos);
}

TEST(StepsPerExecution, CompileRefusesLessThanOne) {
  Model m = tiny_model(1);
  for (const std::int64_t n : {0, -1}) {
    try {
      m.compile({.optimizer = optimizers::SGD(),
                 .loss = std::string("sparse_categorical_crossentropy"),
                 .steps_per_execution = n});
      ADD_FAILURE() << n;
    } catch (const ValueError& e) {
      EXPECT_NE(
          std::string(e.what()).find("steps_per_execution must be >= 1, got " + std::to_string(n)),
          std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace mixprec
