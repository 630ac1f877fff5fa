// callbacks::TensorBoard: a tiny mixed_float16 fit with validation, batch scalars, variable and
// gradient histograms; the train/ and validation/ event files are decoded by the independent test
// decoder and every tag, step and value is checked against History and the logs fit() produced.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/histogram.h"
#include "mixprec/callbacks/tensorboard.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"
#include "support/tfevents_decoder.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

namespace dec = testing::tfevents;

// What fit() told the callbacks, to compare with what TensorBoard wrote.
struct Recorder : callbacks::Callback {
  struct Batch {
    std::int64_t iterations;
    callbacks::Logs::Values logs;
  };
  std::vector<Batch> batches;
  std::vector<callbacks::Logs::Values> epochs;
  void on_train_batch_end(std::int64_t, const callbacks::Logs& logs) override {
    batches.push_back({model().optimizer().iterations(), logs.values()});
  }
  void on_epoch_end(int, const callbacks::Logs& logs) override { epochs.push_back(logs.values()); }
};

struct Point {
  std::int64_t step;
  dec::Value value;
};

// tag -> its values in file order; checks the first record is the file version.
std::map<std::string, std::vector<Point>> by_tag(const std::filesystem::path& run_dir) {
  const std::vector<dec::Event> events = dec::read_events(dec::only_event_file(run_dir));
  EXPECT_FALSE(events.empty());
  if (events.empty()) return {};
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::map<std::string, std::vector<Point>> out;
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].values.size(), 1u);
    for (const dec::Value& v : events[i].values) out[v.tag].push_back({events[i].step, v});
  }
  return out;
}

std::string epoch_tag(const std::string& name) {
  return name.rfind("epoch_", 0) == 0 ? name : "epoch_" + name;
}

TEST(TensorBoardCallbackTest, WritesKerasRunsWithScalarsAndHistograms) {
  testing::PolicyGuard guard(mixed_precision::Policy("mixed_float16"));
  testing::TempDir dir;
  const auto data = testing::blobs(48, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .metrics = {"accuracy"}});
  auto recorder = std::make_shared<Recorder>();
  constexpr int kEpochs = 3;
  constexpr std::int64_t kEvery = 2;
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 8,
                               .epochs = kEpochs,
                               .verbose = Verbosity::silent,
                               .validation_split = 0.25,  // 36 training samples: 5 batches an epoch
                               .callbacks = {callbacks::TensorBoard({.log_dir = dir.path() / "logs",
                                                                     .histogram_freq = 1,
                                                                     .update_freq = kEvery,
                                                                     .write_gradients = true}),
                                             recorder}});
  ASSERT_EQ(h.epochs.size(), static_cast<std::size_t>(kEpochs));
  ASSERT_EQ(recorder->batches.size(), 15u);

  const auto train = by_tag(dir.path() / "logs" / "train");
  const auto validation = by_tag(dir.path() / "logs" / "validation");

  // ---- epoch scalars: every log at step = epoch index, train/ or (val_ stripped) validation/.
  std::set<std::string> expected_train_tags;
  for (int e = 0; e < kEpochs; ++e) {
    for (const auto& [name, value] : recorder->epochs[e]) {
      const bool is_val = name.rfind("val_", 0) == 0;
      const std::string tag = epoch_tag(is_val ? name.substr(4) : name);
      const auto& run = is_val ? validation : train;
      ASSERT_TRUE(run.count(tag)) << tag;
      const std::vector<Point>& points = run.at(tag);
      ASSERT_EQ(points.size(), static_cast<std::size_t>(kEpochs)) << tag;
      EXPECT_EQ(points[e].step, e) << tag;
      ASSERT_TRUE(points[e].value.simple_value.has_value()) << tag;
      EXPECT_EQ(*points[e].value.simple_value, static_cast<float>(value)) << tag;
      if (!is_val) expected_train_tags.insert(tag);
    }
  }
  for (const char* tag :
       {"epoch_loss", "epoch_accuracy", "epoch_learning_rate", "epoch_loss_scale",
        "epoch_skipped_steps", "epoch_step_ms", "epoch_samples_per_s", "epoch_seconds"}) {
    EXPECT_TRUE(expected_train_tags.count(tag)) << tag;
  }
  // ... and they are History's values.
  for (int e = 0; e < kEpochs; ++e) {
    EXPECT_EQ(*train.at("epoch_loss")[e].value.simple_value,
              static_cast<float>(h.history.at("loss")[e]));
    EXPECT_EQ(*train.at("epoch_accuracy")[e].value.simple_value,
              static_cast<float>(h.history.at("accuracy")[e]));
    EXPECT_EQ(*validation.at("epoch_loss")[e].value.simple_value,
              static_cast<float>(h.history.at("val_loss")[e]));
    EXPECT_EQ(*validation.at("epoch_accuracy")[e].value.simple_value,
              static_cast<float>(h.history.at("val_accuracy")[e]));
    ASSERT_TRUE(h.epochs[e].loss_scale.has_value());
    EXPECT_EQ(*train.at("epoch_loss_scale")[e].value.simple_value,
              static_cast<float>(*h.epochs[e].loss_scale));
    EXPECT_EQ(*train.at("epoch_skipped_steps")[e].value.simple_value,
              static_cast<float>(h.epochs[e].skipped_steps));
    EXPECT_FLOAT_EQ(*train.at("epoch_learning_rate")[e].value.simple_value, 0.1f);
  }
  EXPECT_EQ(validation.size(), 2u);  // epoch_loss and epoch_accuracy only

  // ---- batch scalars: every kEvery-th batch (counted across epochs), step = iterations.
  std::size_t written = 0;
  for (std::size_t b = 0; b < recorder->batches.size(); ++b) {
    if ((b + 1) % kEvery != 0) continue;
    const Recorder::Batch& batch = recorder->batches[b];
    for (const auto& [name, value] : batch.logs) {
      const std::string tag = "batch_" + name;
      ASSERT_TRUE(train.count(tag)) << tag;
      ASSERT_GT(train.at(tag).size(), written) << tag;
      const Point& p = train.at(tag)[written];
      EXPECT_EQ(p.step, batch.iterations) << tag;
      EXPECT_EQ(*p.value.simple_value, static_cast<float>(value)) << tag;
    }
    ++written;
  }
  EXPECT_EQ(written, 7u);
  for (const char* tag : {"batch_loss", "batch_accuracy", "batch_learning_rate", "batch_loss_scale",
                          "batch_skipped_steps"}) {
    ASSERT_TRUE(train.count(tag)) << tag;
    EXPECT_EQ(train.at(tag).size(), written) << tag;
  }

  // ---- histograms of every variable and of its gradient, each epoch.
  const std::vector<layers::NamedVariable> variables = model.named_variables();
  ASSERT_EQ(variables.size(), 4u);  // hidden/kernel, hidden/bias, logits/kernel, logits/bias
  for (const layers::NamedVariable& v : variables) {
    for (const std::string& tag : {v.name, v.name + "/gradient"}) {
      ASSERT_TRUE(train.count(tag)) << tag;
      const std::vector<Point>& points = train.at(tag);
      ASSERT_EQ(points.size(), static_cast<std::size_t>(kEpochs)) << tag;
      for (int e = 0; e < kEpochs; ++e) {
        EXPECT_EQ(points[e].step, e) << tag;
        ASSERT_TRUE(points[e].value.histo.has_value()) << tag;
        const dec::Histo& histo = *points[e].value.histo;
        EXPECT_EQ(histo.num, static_cast<double>(v.value.numel())) << tag;
        EXPECT_LE(histo.min, histo.max);
        double count = 0.0;
        for (double c : histo.bucket) count += c;
        EXPECT_EQ(count, histo.num) << tag;
      }
    }
    // The last epoch's histogram is of the final weights.
    const io::Histogram final_weights = io::make_histogram(v.value.to_vector<float>());
    const dec::Histo& last = *train.at(v.name).back().value.histo;
    EXPECT_EQ(last.min, final_weights.min) << v.name;
    EXPECT_EQ(last.max, final_weights.max) << v.name;
    EXPECT_EQ(last.sum, final_weights.sum) << v.name;
    EXPECT_EQ(last.bucket_limit, final_weights.bucket_limit) << v.name;
    EXPECT_EQ(last.bucket, final_weights.bucket) << v.name;
  }
  // The gradients are unscaled: a loss scale of 32768 would put them far above any weight.
  const dec::Histo& kernel_grad = *train.at("logits/kernel/gradient").back().value.histo;
  EXPECT_LT(std::max(std::abs(kernel_grad.min), std::abs(kernel_grad.max)), 100.0);

  // Nothing else in train/: epoch and batch scalars, and the histograms.
  std::size_t histogram_tags = 0;
  for (const auto& [tag, points] : train) {
    if (points.front().value.histo)
      ++histogram_tags;
    else
      EXPECT_TRUE(tag.rfind("batch_", 0) == 0 || expected_train_tags.count(tag)) << tag;
  }
  EXPECT_EQ(histogram_tags, 8u);
}

TEST(TensorBoardCallbackTest, EpochOnlyWithoutValidationOrHistograms) {
  testing::TempDir dir;
  const auto data = testing::blobs(32, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 2,
                               .verbose = Verbosity::silent,
                               .callbacks = {callbacks::TensorBoard({.log_dir = dir.path()})}});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "validation"));
  const auto train = by_tag(dir.path() / "train");
  for (const auto& [tag, points] : train) {
    EXPECT_EQ(tag.rfind("epoch_", 0), 0u) << tag;
    EXPECT_EQ(points.size(), 2u) << tag;
  }
  EXPECT_FALSE(train.count("epoch_loss_scale"));  // float32: no LossScaleOptimizer
  EXPECT_EQ(*train.at("epoch_loss")[1].value.simple_value,
            static_cast<float>(h.history.at("loss")[1]));
  // A second fit() with the same callback options writes a new file beside the first, as Keras.
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 1,
             .verbose = Verbosity::silent,
             .callbacks = {callbacks::TensorBoard({.log_dir = dir.path()})}});
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "train")) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(TensorBoardCallbackTest, BadOptionsAndUnwritableLogDir) {
  using callbacks::TensorBoard;
  testing::expect_error<ValueError>([] { TensorBoard({.log_dir = ""}); }, {"log_dir"});
  testing::expect_error<ValueError>([] { TensorBoard({.histogram_freq = -1}); },
                                    {"histogram_freq"});
  testing::expect_error<ValueError>([] { TensorBoard({.update_freq = std::int64_t{0}}); },
                                    {"update_freq"});
  testing::expect_error<ValueError>([] { TensorBoard({.update_freq = std::string("batch")}); },
                                    {"update_freq", "batch"});
  testing::expect_error<ValueError>([] { TensorBoard({.write_gradients = true}); },
                                    {"write_gradients"});

  testing::TempDir dir;
  const std::filesystem::path blocker = dir.path() / "file";
  std::ofstream(blocker) << "x";
  const auto data = testing::blobs(16, 1);
  Model model = testing::tiny_model(2);
  model.compile({});
  testing::expect_error<IOError>(
      [&] {
        model.fit(data.x, data.y,
                  {.verbose = Verbosity::silent,
                   .callbacks = {TensorBoard({.log_dir = blocker / "logs"})}});
      },
      {(blocker / "logs" / "train").string()});
}

}  // namespace
}  // namespace mixprec
