// Exact resume (issue 11): a fit() interrupted at any batch and started again with the same
// BackupAndRestore directory, in a "new process" (fresh model with other initial weights, other
// global random state), finishes with weights, optimizer slots, iterations and loss scale that are
// bit-identical to the run that was never interrupted, under float32, mixed_float16 and
// mixed_bfloat16. The model has a seeded Dropout (its own generator) and an unseeded one (the
// default generator), and shuffles without a fixed seed, so every piece of random state matters.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("simulated crash") {}
};

// Throws after the `at`-th training batch (counted across epochs), like a process dying there.
struct CrashAfter : callbacks::Callback {
  std::int64_t at, seen = 0;
  explicit CrashAfter(std::int64_t batch) : at(batch) {}
  void on_train_batch_end(std::int64_t, const callbacks::Logs&) override {
    if (++seen == at) throw Crash();
  }
};

Model make_model(std::uint64_t seed) {
  clear_session();
  set_seed(seed);
  auto inputs = Input({2});
  auto x = layers::Dense(16, {.activation = "relu", .name = "hidden"})(inputs);
  x = layers::Dropout(0.2, {.seed = 5, .name = "seeded_dropout"})(x);
  x = layers::Dense(16, {.activation = "relu", .name = "hidden2"})(x);
  x = layers::Dropout(0.1, {.name = "dropout"})(x);
  x = layers::Dense(3, {.name = "logits"})(x);
  auto outputs = layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  Model model(inputs, outputs);
  // A loss scale that grows every 2 steps from 2^14 overflows float16 now and then: the state
  // (scale, counter, skipped steps) changes all through the run.
  model.compile({.optimizer = mixed_precision::LossScaleOptimizer(
                     optimizers::Adam({.learning_rate = 0.01}),
                     {.initial_scale = 16384.0, .dynamic_growth_steps = 2}),
                 .metrics = {"accuracy"}});
  return model;
}

struct Outcome {
  std::vector<std::vector<unsigned char>> weights;  // bytes of every variable
  double loss_scale = 0.0;
  std::int64_t iterations = 0, skipped = 0;
  std::vector<std::vector<unsigned char>> slots;
};

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  return {p, p + c.numel() * static_cast<std::int64_t>(dtype_size(c.dtype()))};
}

Outcome outcome_of(const Model& model) {
  Outcome o;
  for (const Tensor& w : model.get_weights()) o.weights.push_back(bytes_of(w));
  const auto lso = mixed_precision::as_loss_scale_optimizer(model.optimizer());
  o.loss_scale = lso->loss_scale();
  o.skipped = lso->skipped_steps();
  o.iterations = model.optimizer().iterations();
  for (const auto& slot : lso->inner_optimizer().get_state().slots) {
    o.slots.push_back(bytes_of(slot.value));
  }
  return o;
}

FitOptions options(std::vector<callbacks::CallbackRef> cbs) {
  return {.batch_size = 16, .epochs = 3, .verbose = Verbosity::silent, .callbacks = std::move(cbs)};
}

class ResumeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeTest, InterruptedRunFinishesBitIdentical) {
  testing::PolicyGuard guard(GetParam());
  const auto data = testing::blobs(80, 3);  // 5 batches per epoch, 15 in all

  Model reference = make_model(11);
  reference.fit(data.x, data.y, options({}));
  const Outcome expected = outcome_of(reference);
  ASSERT_EQ(expected.iterations, 15);

  // Crashes after batch 1, mid-epoch, at the end of an epoch and at the start of the last one.
  for (const std::int64_t crash_at : {1, 4, 5, 11}) {
    SCOPED_TRACE("crash after batch " + std::to_string(crash_at));
    testing::TempDir dir;
    const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(), .save_freq = 1};
    Model first = make_model(11);
    EXPECT_THROW(first.fit(data.x, data.y,
                           options({callbacks::BackupAndRestore(backup), CrashAfter(crash_at)})),
                 Crash);
    // "A new process": other initial weights, other global random state.
    Model resumed = make_model(999);
    set_seed(123456);
    auto restore = std::make_shared<callbacks::BackupAndRestore>(backup);
    const History h = resumed.fit(data.x, data.y, options({restore}));
    ASSERT_TRUE(restore->restored().has_value());
    EXPECT_EQ(restore->restored()->iterations, crash_at);
    EXPECT_EQ(h.epochs.size(), 3u) << "the History holds every epoch of the run";
    const Outcome got = outcome_of(resumed);
    EXPECT_EQ(got.iterations, expected.iterations);
    EXPECT_EQ(got.loss_scale, expected.loss_scale);
    EXPECT_EQ(got.skipped, expected.skipped);
    EXPECT_TRUE(got.weights == expected.weights) << "weights differ";
    EXPECT_TRUE(got.slots == expected.slots) << "optimizer slots differ";
    EXPECT_TRUE(restore->checkpoints().empty()) << "deleted when fit() completes";
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ResumeTest,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"));

TEST(ResumeTest, TheLossScaleStateChangesDuringTheRun) {
  // Guards the test above against a trivially constant scale.
  testing::PolicyGuard guard("mixed_float16");
  const auto data = testing::blobs(80, 3);
  Model model = make_model(11);
  model.fit(data.x, data.y, options({}));
  const Outcome o = outcome_of(model);
  EXPECT_NE(o.loss_scale, 16384.0);
}

// Every epoch's record, field by field (step times aside: they are timings, and a restored epoch
// has none).
void expect_same_history(const History& got, const History& expected) {
  ASSERT_EQ(got.epochs.size(), expected.epochs.size());
  for (std::size_t i = 0; i < got.epochs.size(); ++i) {
    SCOPED_TRACE("epoch " + std::to_string(i + 1));
    EXPECT_EQ(got.epochs[i].epoch, expected.epochs[i].epoch);
    EXPECT_EQ(got.epochs[i].metrics, expected.epochs[i].metrics);  // every key, exactly
    EXPECT_EQ(got.epochs[i].loss_scale, expected.epochs[i].loss_scale);
    EXPECT_EQ(got.epochs[i].skipped_steps, expected.epochs[i].skipped_steps);
  }
  EXPECT_EQ(got.history, expected.history);
}

FitOptions four_epochs(std::vector<callbacks::CallbackRef> cbs, int epochs = 4) {
  FitOptions o = options(std::move(cbs));
  o.epochs = epochs;
  o.validation_split = 0.2;  // val_loss and val_accuracy in the record too
  return o;
}

// Issue 33: the History of a resumed fit() holds every epoch of the run, and the resumed epoch's
// training metrics (its loss and accuracy over all its batches) equal the uninterrupted run's:
// the epochs so far and the epoch's running sums travel in the checkpoint.
TEST_P(ResumeTest, TheResumedHistoryHoldsEveryEpochWithTheUninterruptedValues) {
  testing::PolicyGuard guard(GetParam());
  const auto data = testing::blobs(100, 3);  // 80 for training: 5 batches per epoch, 20 in all

  Model reference = make_model(11);
  const History expected = reference.fit(data.x, data.y, four_epochs({}));
  ASSERT_EQ(expected.epochs.size(), 4u);
  ASSERT_TRUE(expected.epochs[0].metrics.contains("val_accuracy"));
  const Outcome expected_outcome = outcome_of(reference);

  // fit() 2 epochs, then a new model resumes to 4 from the checkpoint of the end of epoch 2.
  {
    testing::TempDir dir;
    const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(),
                                                    .delete_checkpoint = false};
    Model first = make_model(11);
    first.fit(data.x, data.y, four_epochs({callbacks::BackupAndRestore(backup)}, 2));
    Model resumed = make_model(999);
    set_seed(123456);
    const History h =
        resumed.fit(data.x, data.y, four_epochs({callbacks::BackupAndRestore(backup)}));
    expect_same_history(h, expected);
    EXPECT_TRUE(outcome_of(resumed).weights == expected_outcome.weights) << "weights differ";
  }
  // Stopped inside epoch 2 (after its 2nd batch) and inside epoch 4 (after its 4th).
  for (const std::int64_t crash_at : {7, 19}) {
    SCOPED_TRACE("crash after batch " + std::to_string(crash_at));
    testing::TempDir dir;
    const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(), .save_freq = 1};
    Model first = make_model(11);
    EXPECT_THROW(
        first.fit(data.x, data.y,
                  four_epochs({callbacks::BackupAndRestore(backup), CrashAfter(crash_at)})),
        Crash);
    Model resumed = make_model(999);
    set_seed(123456);
    const History h =
        resumed.fit(data.x, data.y, four_epochs({callbacks::BackupAndRestore(backup)}));
    expect_same_history(h, expected);
    EXPECT_TRUE(outcome_of(resumed).weights == expected_outcome.weights) << "weights differ";
  }
}

// A checkpoint written before checkpoints kept the record still resumes, bit-identical; its
// History then starts at the resumed epoch, and a warning says so once.
TEST(ResumeTest, ACheckpointWithoutTheRecordResumesWithTheHistoryFromThere) {
  const auto data = testing::blobs(100, 3);
  Model reference = make_model(11);
  const History expected = reference.fit(data.x, data.y, four_epochs({}));

  testing::TempDir dir;
  const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(),
                                                  .delete_checkpoint = false};
  Model first = make_model(11);
  first.fit(data.x, data.y, four_epochs({callbacks::BackupAndRestore(backup)}, 2));
  const std::vector<std::filesystem::path> files =
      callbacks::BackupAndRestore(backup).checkpoints();
  ASSERT_FALSE(files.empty());
  const std::filesystem::path newest = files.back();  // the one a resume restores
  // The file as an older mixprec wrote it: the same state without "record" (and its checksums
  // written again by save_safetensors).
  io::SafetensorsContents old = io::load_safetensors(newest);
  auto state = nlohmann::json::parse(old.metadata.at("state"));
  ASSERT_TRUE(state.contains("record"));
  state.erase("record");
  old.metadata["state"] = state.dump();
  old.metadata.erase("mixprec_crc32c");
  io::save_safetensors(newest, old.tensors, old.metadata);

  std::vector<std::string> warnings;
  const LogHandler previous = set_log_handler([&](LogLevel level, std::string_view message) {
    if (level == LogLevel::warning) warnings.emplace_back(message);
  });
  Model resumed = make_model(999);
  const History h = resumed.fit(data.x, data.y, four_epochs({callbacks::BackupAndRestore(backup)}));
  set_log_handler(previous);

  ASSERT_EQ(h.epochs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(h.epochs[i].epoch, expected.epochs[i + 2].epoch);
    EXPECT_EQ(h.epochs[i].metrics, expected.epochs[i + 2].metrics);
  }
  EXPECT_TRUE(outcome_of(resumed).weights == outcome_of(reference).weights) << "weights differ";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(newest.string() + ": written before checkpoints kept the run's "
                                               "record"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("starts at epoch 3"), std::string::npos) << warnings[0];
}

// Inside an epoch the checkpoint holds the running sums of the metrics it was trained with; a
// model compiled with other metrics cannot continue them: an error naming both, nothing restored.
TEST(ResumeTest, ResumingInsideAnEpochWithOtherMetricsIsAClearError) {
  const auto data = testing::blobs(80, 3);
  testing::TempDir dir;
  const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(), .save_freq = 1};
  Model first = make_model(11);
  EXPECT_THROW(
      first.fit(data.x, data.y, options({callbacks::BackupAndRestore(backup), CrashAfter(2)})),
      Crash);
  Model second = make_model(11);
  second.compile({.optimizer = mixed_precision::LossScaleOptimizer(
                      optimizers::Adam({.learning_rate = 0.01}),
                      {.initial_scale = 16384.0, .dynamic_growth_steps = 2}),
                  .metrics = {"sparse_categorical_accuracy"}});
  const std::vector<Tensor> before = second.get_weights();
  try {
    second.fit(data.x, data.y, options({callbacks::BackupAndRestore(backup)}));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ckpt-2.safetensors: "), std::string::npos) << m;
    EXPECT_NE(m.find("were loss, accuracy"), std::string::npos) << m;
    EXPECT_NE(m.find("compiled with loss, sparse_categorical_accuracy"), std::string::npos) << m;
  }
  EXPECT_TRUE(bytes_of(second.get_weights()[0]) == bytes_of(before[0])) << "nothing restored";
}

TEST(ResumeTest, ACheckpointOfAnotherRunShapeIsAClearError) {
  const auto data = testing::blobs(80, 3);
  testing::TempDir dir;
  const callbacks::BackupAndRestoreOptions backup{.backup_dir = dir.path(), .save_freq = 1};
  Model first = make_model(11);
  EXPECT_THROW(
      first.fit(data.x, data.y, options({callbacks::BackupAndRestore(backup), CrashAfter(2)})),
      Crash);
  Model second = make_model(11);
  FitOptions other = options({callbacks::BackupAndRestore(backup)});
  other.batch_size = 8;
  try {
    second.fit(data.x, data.y, other);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size 16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
