// Model::fit end to end on tiny deterministic problems made here: XOR (needs the hidden layer) and
// three Gaussian blobs, under float32, mixed_float16 and mixed_bfloat16. Accuracy is measured in
// the test from predict() on fresh samples; loss-scaling expectations (skipped steps, the final
// scale, the step at which a stuck scale throws) are worked out from the float16 range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace mp = mixprec;
using mixed_precision::LossScaleOptimizer;
using mixed_precision::Policy;

using testing::PolicyGuard;

// Captures log messages that contain `filter` for its lifetime.
class CapturedLog {
 public:
  explicit CapturedLog(std::string filter)
      : filter_(std::move(filter)), previous_(set_log_handler([this](LogLevel, std::string_view m) {
          if (m.find(filter_) != std::string_view::npos) messages_.emplace_back(m);
        })) {}
  ~CapturedLog() { set_log_handler(std::move(previous_)); }
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::string filter_;
  std::vector<std::string> messages_;
  LogHandler previous_;
};

// Redirects std::cout into a string for its lifetime.
class CapturedStdout {
 public:
  CapturedStdout() : old_(std::cout.rdbuf(buffer_.rdbuf())) {}
  ~CapturedStdout() { std::cout.rdbuf(old_); }
  std::string str() const { return buffer_.str(); }

 private:
  std::ostringstream buffer_;
  std::streambuf* old_;
};

template <typename E, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

struct Data {
  Tensor x;  // (n, 2) float32
  Tensor y;  // (n,) int64
  std::vector<std::int64_t> labels;
};

// XOR: four clusters at (+-1, +-1) with noise 0.25; class 1 where x0 * x1 > 0.
Data xor_data(std::int64_t n, std::uint64_t seed) {
  Generator g(seed);
  std::vector<float> xs;
  Data d;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = (i % 2) ? 1.0 : -1.0;
    const double b = ((i / 2) % 2) ? 1.0 : -1.0;
    xs.push_back(static_cast<float>(a + 0.25 * g.normal()));
    xs.push_back(static_cast<float>(b + 0.25 * g.normal()));
    d.labels.push_back(a * b > 0 ? 1 : 0);
  }
  d.x = from_vector(xs, {n, 2});
  d.y = from_vector(d.labels, {n});
  return d;
}

// Three blobs around (0, 3), (-2.6, -1.5), (2.6, -1.5) with noise 0.5: linearly separable.
Data blob_data(std::int64_t n, std::uint64_t seed) {
  const double cx[3] = {0.0, -2.6, 2.6};
  const double cy[3] = {3.0, -1.5, -1.5};
  Generator g(seed);
  std::vector<float> xs;
  Data d;
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    xs.push_back(static_cast<float>(cx[c] + 0.5 * g.normal()));
    xs.push_back(static_cast<float>(cy[c] + 0.5 * g.normal()));
    d.labels.push_back(c);
  }
  d.x = from_vector(xs, {n, 2});
  d.y = from_vector(d.labels, {n});
  return d;
}

// Input(2) -> Dense(hidden, relu) -> Dense(classes) -> softmax in float32 (the seed's CORRECT
// model) under the current global policy, with weights drawn from `seed`.
Model make_mlp(std::int64_t hidden, std::int64_t classes, std::uint64_t seed) {
  clear_session();
  set_seed(seed);
  auto inputs = Input({2});
  auto x = layers::Dense(hidden, {.activation = "relu", .name = "hidden"})(inputs);
  x = layers::Dense(classes, {.name = "logits"})(x);
  auto outputs = layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  return Model(inputs, outputs);
}

// (n, classes) float32 one-hot rows of `labels`.
Tensor one_hot_of(const std::vector<std::int64_t>& labels, std::int64_t classes) {
  std::vector<float> v(labels.size() * static_cast<std::size_t>(classes), 0.0f);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    v[i * static_cast<std::size_t>(classes) + static_cast<std::size_t>(labels[i])] = 1.0f;
  }
  return from_vector(v, {static_cast<std::int64_t>(labels.size()), classes});
}

// Accuracy of predict() against the labels, computed here from the probabilities.
double accuracy_of(Model& model, const Data& d) {
  const std::vector<double> p = model.predict(d.x, {.batch_size = 64}).to_vector<double>();
  const std::size_t classes = p.size() / d.labels.size();
  std::size_t correct = 0;
  for (std::size_t i = 0; i < d.labels.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < classes; ++c) {
      if (p[i * classes + c] > p[i * classes + best]) best = c;
    }
    correct += static_cast<std::int64_t>(best) == d.labels[i] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(d.labels.size());
}

class FitPolicyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FitPolicyTest, XorLossFallsAndAccuracyIsHigh) {
  PolicyGuard guard(GetParam());
  const Data train = xor_data(256, 1);
  const Data test = xor_data(512, 2);
  Model model = make_mlp(16, 2, 7);
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.02}),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  const double before = accuracy_of(model, test);
  History h = model.fit(train.x, train.y,
                        {.batch_size = 16, .epochs = 25, .verbose = Verbosity::silent, .seed = 3});
  ASSERT_EQ(h.epochs.size(), 25u);
  ASSERT_EQ(h.history.at("loss").size(), 25u);
  EXPECT_LT(h.history["loss"].back(), 0.5 * h.history["loss"].front()) << GetParam();
  EXPECT_GE(h.history.at("accuracy").back(), 0.95) << GetParam();
  const double after = accuracy_of(model, test);
  EXPECT_GE(after, 0.95) << GetParam() << " (before training: " << before << ")";
  // evaluate() agrees with the accuracy counted here.
  const Scores s = model.evaluate(test.x, test.y, {.batch_size = 50, .verbose = Verbosity::silent});
  EXPECT_NEAR(s.at("accuracy"), after, 1e-12);
  EXPECT_EQ(s.values[0].first, "loss");
  for (const EpochLog& e : h.epochs) {
    EXPECT_EQ(e.step_ms.size(), 16u);  // 256 / 16
    EXPECT_GT(e.seconds, 0.0);
  }
}

TEST_P(FitPolicyTest, BlobsReachHighAccuracyWithTheDefaultOptimizer) {
  PolicyGuard guard(GetParam());
  const Data train = blob_data(240, 3);
  const Data test = blob_data(300, 4);
  Model model = make_mlp(8, 3, 11);
  model.compile(
      {.optimizer = optimizers::RMSprop({.learning_rate = 0.01}), .metrics = {"accuracy"}});
  History h = model.fit(train.x, train.y,
                        {.batch_size = 32, .epochs = 10, .verbose = Verbosity::silent, .seed = 5});
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
  EXPECT_GE(accuracy_of(model, test), 0.97) << GetParam();
}

// Issue 33: training works, not only runs, on every loss path. The logits losses (from_logits,
// the fused softmax-cross-entropy gradient the CLI's models train with) and the one-hot loss:
// the loss must fall by half and the test accuracy rise from chance to nearly all, under each
// policy. A wrong sign in the true class's gradient term passed the tests above, which train
// through a softmax layer and the sparse loss on probabilities.
TEST_P(FitPolicyTest, LogitsAndOneHotLossesLearn) {
  PolicyGuard guard(GetParam());
  const Data train = blob_data(240, 3);
  const Data test = blob_data(300, 4);
  const std::vector<std::pair<std::string, losses::Loss>> cases = {
      {"sparse, from logits", losses::SparseCategoricalCrossentropy({.from_logits = true})},
      {"one-hot, from logits", losses::CategoricalCrossentropy({.from_logits = true})},
      {"one-hot, probabilities", losses::CategoricalCrossentropy()}};
  for (const auto& [name, loss] : cases) {
    SCOPED_TRACE(name);
    const bool logits = name.find("logits") != std::string::npos;
    clear_session();
    set_seed(11);
    auto inputs = Input({2});
    auto x = layers::Dense(8, {.activation = "relu", .name = "hidden"})(inputs);
    x = layers::Dense(3, {.name = "logits"})(x);
    if (!logits) x = layers::Activation("softmax", {.name = "predictions"})(x);
    auto outputs = layers::Activation("linear", {.dtype = "float32", .name = "out"})(x);
    Model model(inputs, outputs);
    model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.02}), .loss = loss});
    const bool one_hot = name.find("one-hot") != std::string::npos;
    const Tensor y = one_hot ? one_hot_of(train.labels, 3) : train.y;
    const double before = accuracy_of(model, test);
    const History h = model.fit(
        train.x, y, {.batch_size = 16, .epochs = 10, .verbose = Verbosity::silent, .seed = 5});
    EXPECT_LT(h.history.at("loss").back(), 0.5 * h.history.at("loss").front()) << GetParam();
    const double after = accuracy_of(model, test);
    EXPECT_GE(after, 0.95) << GetParam();
    EXPECT_GT(after, before + 0.3) << GetParam() << ": accuracy " << before << " -> " << after;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, FitPolicyTest,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"),
                         [](const auto& info) { return std::string(info.param); });

// Everything in two Histories except wall times.
void expect_same_history(const History& a, const History& b) {
  EXPECT_EQ(a.history, b.history);
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (std::size_t i = 0; i < a.epochs.size(); ++i) {
    EXPECT_EQ(a.epochs[i].metrics, b.epochs[i].metrics);
    EXPECT_EQ(a.epochs[i].loss_scale, b.epochs[i].loss_scale);
    EXPECT_EQ(a.epochs[i].skipped_steps, b.epochs[i].skipped_steps);
  }
}

TEST(FitTest, SameSeedGivesIdenticalHistory) {
  PolicyGuard guard("mixed_float16");
  const Data train = xor_data(128, 8);
  auto run = [&](std::uint64_t shuffle_seed) {
    Model model = make_mlp(8, 2, 21);
    model.compile(
        {.optimizer = optimizers::Adam({.learning_rate = 0.01}), .metrics = {"accuracy"}});
    return model.fit(train.x, train.y,
                     {.batch_size = 16,
                      .epochs = 4,
                      .verbose = Verbosity::silent,
                      .validation_split = 0.25,
                      .seed = shuffle_seed});
  };
  const History a = run(9);
  const History b = run(9);
  expect_same_history(a, b);
  ASSERT_TRUE(a.epochs[0].loss_scale.has_value());
  // Another shuffling order gives other losses (so the comparison above can fail).
  const History c = run(10);
  EXPECT_NE(a.history.at("loss"), c.history.at("loss"));
}

TEST(FitTest, ValidationSplitReportsTheLastSamples) {
  PolicyGuard guard("float32");
  const Data all = blob_data(200, 12);
  Model model = make_mlp(8, 3, 13);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.05}), .metrics = {"accuracy"}});
  History h = model.fit(all.x, all.y,
                        {.batch_size = 32,
                         .epochs = 2,
                         .verbose = Verbosity::silent,
                         .validation_split = 0.2,
                         .seed = 1});
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    ASSERT_EQ(h.history.count(key), 1u) << key;
    EXPECT_EQ(h.history.at(key).size(), 2u) << key;
  }
  // Trained on the first 160 samples: 5 steps of 32 per epoch.
  EXPECT_EQ(h.epochs[1].step_ms.size(), 5u);
  // The last epoch's validation is the last 40 samples under the final weights.
  const Tensor xv = all.x.slice(0, 160, 200);
  const Tensor yv = all.y.slice(0, 160, 200);
  const Scores s = model.evaluate(xv, yv, {.batch_size = 7, .verbose = Verbosity::silent});
  EXPECT_NEAR(h.history.at("val_loss").back(), s.at("loss"), 1e-6);
  Data val;
  val.x = xv;
  val.labels.assign(all.labels.begin() + 160, all.labels.end());
  EXPECT_NEAR(h.history.at("val_accuracy").back(), accuracy_of(model, val), 1e-12);
}

TEST(FitTest, ValidationDataIsEvaluatedEachEpoch) {
  PolicyGuard guard("mixed_bfloat16");
  const Data train = blob_data(90, 14);
  const Data val = blob_data(45, 15);
  Model model = make_mlp(8, 3, 16);
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}), .metrics = {"accuracy"}});
  History h = model.fit(train.x, train.y,
                        {.batch_size = 30,
                         .epochs = 3,
                         .verbose = Verbosity::silent,
                         .validation_data = std::pair{val.x, val.y},
                         .seed = 2});
  ASSERT_EQ(h.history.at("val_loss").size(), 3u);
  EXPECT_EQ(h.epochs[0].step_ms.size(), 3u);         // all 90 samples train
  EXPECT_FALSE(h.epochs[0].loss_scale.has_value());  // no loss scaling under bfloat16
  EXPECT_NEAR(h.history.at("val_accuracy").back(), accuracy_of(model, val), 1e-12);
}

TEST(FitTest, OptimizerIsWrappedOnlyUnderMixedFloat16) {
  const Data d = blob_data(30, 1);
  for (const char* policy : {"float32", "mixed_bfloat16", "mixed_float16"}) {
    PolicyGuard guard(policy);
    Model model = make_mlp(4, 3, 1);
    optimizers::Optimizer sgd = optimizers::SGD();
    model.compile({.optimizer = sgd});
    const auto lso = mixed_precision::as_loss_scale_optimizer(model.optimizer());
    if (std::string(policy) == "mixed_float16") {
      ASSERT_TRUE(lso.has_value());
      EXPECT_EQ(lso->inner_optimizer().impl(), sgd.impl());
      EXPECT_TRUE(lso->dynamic());
      EXPECT_EQ(lso->loss_scale(), 32768.0);
    } else {
      EXPECT_FALSE(lso.has_value()) << policy;
      EXPECT_EQ(model.optimizer().impl(), sgd.impl()) << policy;
    }
    // The default optimizer is RMSprop (inside the wrapper under mixed_float16).
    model.compile({});
    const auto lso2 = mixed_precision::as_loss_scale_optimizer(model.optimizer());
    EXPECT_EQ(lso2 ? lso2->inner_optimizer().name() : model.optimizer().name(), "rmsprop");
  }
  // A LossScaleOptimizer passed in is used as it is, not wrapped twice.
  PolicyGuard guard("mixed_float16");
  Model model = make_mlp(4, 3, 1);
  LossScaleOptimizer mine(optimizers::SGD(), {.initial_scale = 256.0});
  model.compile({.optimizer = mine});
  EXPECT_EQ(model.optimizer().impl(), mine.impl());
  // Only one layer in mixed_float16 is enough to wrap.
  PolicyGuard f32("float32");
  clear_session();
  auto in = Input({2});
  auto h = layers::Dense(4, {.dtype = "mixed_float16"})(in);
  Model partly(in, layers::Activation("softmax", {.dtype = "float32"})(h));
  partly.compile({});
  EXPECT_TRUE(mixed_precision::as_loss_scale_optimizer(partly.optimizer()).has_value());
}

TEST(FitTest, HugeInitialScaleSkipsStepsThatShowInHistory) {
  PolicyGuard guard("mixed_float16");
  const Data train = blob_data(240, 17);
  Model model = make_mlp(8, 3, 18);
  LossScaleOptimizer opt(optimizers::SGD({.learning_rate = 0.1}),
                         {.initial_scale = std::ldexp(1.0, 60)});
  model.compile({.optimizer = opt, .metrics = {"accuracy"}});
  History h = model.fit(train.x, train.y,
                        {.batch_size = 16, .epochs = 6, .verbose = Verbosity::silent, .seed = 4});
  // The gradient reaching the float16 logits is (p - onehot) / 16, about 0.04 at the start, so a
  // scale above ~65504 / 0.04 = 2^20.6 overflows float16: at least 60 - 21 = 39 skipped steps.
  std::int64_t skipped = 0;
  for (const EpochLog& e : h.epochs) skipped += e.skipped_steps;
  EXPECT_GE(skipped, 39);
  EXPECT_GE(h.epochs[0].skipped_steps, 15);  // the whole first epoch (15 steps) overflows
  EXPECT_EQ(skipped, opt.skipped_steps());
  // Without growth (2000 steps) the scale only halved, once per skipped step.
  ASSERT_TRUE(h.epochs.back().loss_scale.has_value());
  EXPECT_EQ(*h.epochs.back().loss_scale, std::ldexp(1.0, 60 - static_cast<int>(skipped)));
  EXPECT_LT(*h.epochs.back().loss_scale, std::ldexp(1.0, 22));
  for (std::size_t i = 1; i < h.epochs.size(); ++i) {
    EXPECT_LE(*h.epochs[i].loss_scale, *h.epochs[i - 1].loss_scale);
  }
  EXPECT_EQ(h.epochs.back().skipped_steps, 0);  // settled
  EXPECT_LT(h.history["loss"].back(), h.history["loss"].front());
}

TEST(FitTest, OneLinePerEpochShowsMetricsAndLossScale) {
  PolicyGuard guard("mixed_float16");
  const Data train = blob_data(60, 19);
  Model model = make_mlp(4, 3, 20);
  // 2^40 overflows float16 (the logits' gradient is ~0.04) and prints as an integer.
  model.compile(
      {.optimizer = LossScaleOptimizer(optimizers::SGD(), {.initial_scale = std::ldexp(1.0, 40)}),
       .metrics = {"accuracy"}});
  std::string out;
  History h;
  {
    CapturedStdout capture;
    h = model.fit(train.x, train.y,
                  {.batch_size = 20,
                   .epochs = 2,
                   .verbose = Verbosity::one_line_per_epoch,
                   .validation_split = 0.5,
                   .seed = 1});
    out = capture.str();
  }
  std::vector<std::string> lines;
  std::istringstream stream(out);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
  for (int e = 0; e < 2; ++e) {
    const std::string& line = lines[static_cast<std::size_t>(e)];
    EXPECT_EQ(line.rfind("Epoch " + std::to_string(e + 1) + "/2 - 2/2 - ", 0), 0u) << line;
    char expected[64];
    std::snprintf(expected, sizeof expected, " - loss: %.4f",
                  h.history["loss"][static_cast<std::size_t>(e)]);
    EXPECT_NE(line.find(expected), std::string::npos) << line;
    std::snprintf(expected, sizeof expected, " - val_accuracy: %.4f",
                  h.history["val_accuracy"][static_cast<std::size_t>(e)]);
    EXPECT_NE(line.find(expected), std::string::npos) << line;
    std::snprintf(expected, sizeof expected, " - loss_scale: %.0f",
                  *h.epochs[static_cast<std::size_t>(e)].loss_scale);
    EXPECT_NE(line.find(expected), std::string::npos) << line;
  }
  EXPECT_EQ(h.epochs[0].skipped_steps, 2);
  EXPECT_EQ(*h.epochs[1].loss_scale, std::ldexp(1.0, 36));
  EXPECT_NE(lines[0].find(" - skipped_steps: 2"), std::string::npos) << lines[0];
}

// Input(4) -> Dense(8, "dense_ok") -> Dense(8, "dense_inf") -> Dense(3) -> softmax float32.
Model model_with_inf_layer() {
  clear_session();
  set_seed(30);
  auto in = Input({4});
  auto x = layers::Dense(8, {.name = "dense_ok"})(in);
  x = layers::Dense(8, {.name = "dense_inf"})(x);
  x = layers::Dense(3, {.name = "logits"})(x);
  return Model(in, layers::Activation("softmax", {.dtype = "float32"})(x));
}

TEST(FitTest, StuckScaleNamesTheLayerWhoseOutputOverflows) {
  PolicyGuard guard("mixed_float16");
  Model model = model_with_inf_layer();
  // 1e6 is finite in the float32 variable but Inf once read as float16 (max 65504).
  model.get_layer("dense_inf").set_weights({full({8, 8}, 1e6), zeros({8})});
  model.compile({.optimizer = optimizers::SGD()});
  const std::vector<Tensor> before = model.get_layer("dense_ok").get_weights();
  Generator g(5);
  const Tensor x = random_normal({64, 4}, 0.0, 1.0, {}, g);
  std::vector<std::int64_t> labels(64);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 3);
  const Tensor y = from_vector(labels, {64});
  // 15 skipped steps halve 32768 to 1; steps 16..115 then run at scale 1, and the 100th of them
  // (step 115 = epoch 8, step 3 with 16 steps per epoch) throws.
  const std::string msg = error_message<Error>([&] {
    model.fit(x, y,
              {.batch_size = 4, .epochs = 10, .verbose = Verbosity::silent, .shuffle = false});
  });
  EXPECT_NE(msg.find("fit(), epoch 8, step 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 consecutive steps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layer 'dense_inf' (Dense, policy mixed_float16)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  // Every step was skipped: the weights are untouched.
  const std::vector<Tensor> after = model.get_layer("dense_ok").get_weights();
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].to_vector<float>(), after[i].to_vector<float>());
  }
  const auto lso = mixed_precision::as_loss_scale_optimizer(model.optimizer());
  EXPECT_EQ(lso->skipped_steps(), 115);
  EXPECT_EQ(lso->loss_scale(), 1.0);
}

TEST(FitTest, StuckScaleNamesTheLayerWhoseGradientOverflows) {
  PolicyGuard guard("mixed_float16");
  clear_session();
  auto in = Input({4});
  auto x = layers::Dense(8, {.name = "zero"})(in);
  x = layers::Dense(16, {.name = "huge"})(x);
  x = layers::Dense(3, {.name = "logits"})(x);
  Model model(in, layers::Activation("softmax", {.dtype = "float32"})(x));
  // Forward: "zero" outputs exact zeros, so "huge" (kernel 60000, finite in float16) outputs 0 and
  // the logits are 0. Backward: with logits kernel rows (1, -1, 0) the gradient at "huge"'s output
  // is +-1/4 per sample (labels 0 and 1, batch 4), and at its input 16 * 60000 / 4 = 240000, past
  // float16's 65504 even at scale 1. Every forward value stays finite.
  model.get_layer("zero").set_weights({zeros({4, 8}), zeros({8})});
  model.get_layer("huge").set_weights({full({8, 16}, 60000.0), zeros({16})});
  std::vector<float> k3;
  for (int i = 0; i < 16; ++i) k3.insert(k3.end(), {1.0f, -1.0f, 0.0f});
  model.get_layer("logits").set_weights({from_vector(k3, {16, 3}), zeros({3})});
  model.compile({.optimizer = optimizers::SGD()});
  Generator g(6);
  const Tensor xs = random_normal({32, 4}, 0.0, 1.0, {}, g);
  std::vector<std::int64_t> labels(32);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 2);
  const std::string msg = error_message<Error>([&] {
    model.fit(xs, from_vector(labels, {32}),
              {.batch_size = 4, .epochs = 20, .verbose = Verbosity::silent, .seed = 1});
  });
  EXPECT_NE(msg.find("every layer output is finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layer 'huge' (Dense, policy mixed_float16)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gradient of its input 'zero'"), std::string::npos) << msg;
}

TEST(FitTest, StuckFixedScaleNamesTheLossGradient) {
  PolicyGuard guard("float32");
  Model model = make_mlp(4, 3, 31);
  // sqrt(0 * p) is 0, but its gradient is 0 * (1 / 0) = NaN.
  losses::Loss nan_gradient("nan_gradient",
                            [](const Tensor&, const Tensor& p) { return mean(sqrt(mul(p, 0.0))); });
  // A fixed scale never comes down, so every skipped step counts toward the error at once.
  model.compile({.optimizer = LossScaleOptimizer(optimizers::SGD(),
                                                 {.dynamic = false, .initial_scale = 1024.0}),
                 .loss = nan_gradient});
  const Data d = blob_data(30, 2);
  const std::vector<Tensor> before = model.get_weights();
  const std::string msg = error_message<Error>(
      [&] { model.fit(d.x, d.y, {.batch_size = 3, .epochs = 20, .verbose = Verbosity::silent}); });
  // 10 steps per epoch: the 100th consecutive skipped step is epoch 10, step 10.
  EXPECT_NE(msg.find("epoch 10, step 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fixed loss scale of 1024"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loss 'nan_gradient'"), std::string::npos) << msg;
  const std::vector<Tensor> after = model.get_weights();
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].to_vector<float>(), after[i].to_vector<float>());
  }
}

TEST(FitTest, StuckScaleAlsoStopsTrainOnBatch) {
  PolicyGuard guard("mixed_float16");
  Model model = model_with_inf_layer();
  model.get_layer("dense_inf").set_weights({full({8, 8}, 1e6), zeros({8})});
  model.compile({.optimizer = LossScaleOptimizer(optimizers::SGD(), {.initial_scale = 4.0})});
  const Tensor x = ones({4, 4});
  const Tensor y = from_vector(std::vector<std::int64_t>{0, 1, 2, 0}, {4});
  // Steps 1 and 2 run at scales 4 and 2; steps 3..102 at 1: the 100th of those throws.
  for (int step = 1; step <= 101; ++step) {
    ASSERT_NO_THROW(model.train_on_batch(x, y)) << step;
  }
  const std::string msg = error_message<Error>([&] { model.train_on_batch(x, y); });
  EXPECT_NE(msg.find("train_on_batch(): the loss scale has been 1 for 100"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'dense_inf'"), std::string::npos) << msg;
}

TEST(FitTest, OutputNotFloat32WarnsOnceUnderMixedPolicy) {
  reset_warn_once_for_testing();
  PolicyGuard guard("mixed_float16");
  const Data d = blob_data(30, 3);
  {
    CapturedLog log("not float32");
    clear_session();
    // The seed's INCORRECT model: the softmax runs in float16.
    auto in = Input({2});
    auto x = layers::Dense(8, {.activation = "relu"})(in);
    Model model(in, layers::Dense(3, {.activation = "softmax", .name = "predictions"})(x));
    model.compile({});
    model.compile({.optimizer = optimizers::SGD()});
    model.fit(d.x, d.y, {.batch_size = 10, .epochs = 1, .verbose = Verbosity::silent});
    ASSERT_EQ(log.messages().size(), 1u);
    const std::string& m = log.messages()[0];
    EXPECT_NE(m.find("'predictions'"), std::string::npos) << m;
    EXPECT_NE(m.find("float16"), std::string::npos) << m;
    EXPECT_NE(m.find("Activation(\"softmax\", {.dtype = \"float32\"})"), std::string::npos) << m;
  }
  {
    CapturedLog log("not float32");
    Model correct = make_mlp(8, 3, 1);  // ends in a float32 softmax
    correct.compile({});
    correct.fit(d.x, d.y, {.batch_size = 10, .epochs = 1, .verbose = Verbosity::silent});
    EXPECT_TRUE(log.messages().empty());
  }
  {
    // A Sequential without an InputLayer has no output until its first call: checked then.
    CapturedLog log("not float32");
    clear_session();
    Sequential seq({layers::Dense(4, {.activation = "relu"}),
                    layers::Dense(3, {.activation = "softmax", .name = "out16"})});
    seq.compile({});
    EXPECT_TRUE(log.messages().empty());
    seq.fit(d.x, d.y, {.batch_size = 10, .epochs = 2, .verbose = Verbosity::silent});
    ASSERT_EQ(log.messages().size(), 1u);
    EXPECT_NE(log.messages()[0].find("'out16'"), std::string::npos) << log.messages()[0];
  }
  {
    // 16-bit logits into a loss from logits: the loss's softmax runs in float32 (as a GPT's tied
    // head trains), so there is nothing to warn about.
    CapturedLog log("not float32");
    clear_session();
    auto in = Input({2});
    auto x = layers::Dense(8, {.activation = "relu"})(in);
    Model model(in, layers::Dense(3, {.name = "logits16"})(x));
    model.compile({.loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
    model.fit(d.x, d.y, {.batch_size = 10, .epochs = 1, .verbose = Verbosity::silent});
    EXPECT_TRUE(log.messages().empty()) << log.messages()[0];
  }
  reset_warn_once_for_testing();
}

TEST(FitTest, NoWarningUnderFloat32Policy) {
  reset_warn_once_for_testing();
  PolicyGuard guard("float16");  // not mixed: a float16 output is the user's choice
  CapturedLog log("not float32");
  clear_session();
  auto in = Input({2});
  Model model(in, layers::Dense(3, {.activation = "softmax"})(in));
  model.compile({});
  EXPECT_TRUE(log.messages().empty());
  reset_warn_once_for_testing();
}

TEST(FitTest, InvalidArgumentsThrowBeforeAnyWork) {
  PolicyGuard guard("float32");
  const Data d = blob_data(30, 4);
  Model model = make_mlp(4, 3, 1);
  std::string msg = error_message<ValueError>([&] { model.fit(d.x, d.y); });
  EXPECT_NE(msg.find("model.compile("), std::string::npos) << msg;

  model.compile({.optimizer = optimizers::SGD()});
  const std::vector<Tensor> before = model.get_weights();
  msg = error_message<ValueError>([&] { model.fit(d.x, d.y, {.batch_size = 0}); });
  EXPECT_NE(msg.find("batch_size must be positive, got 0"), std::string::npos) << msg;
  msg = error_message<ValueError>([&] { model.fit(d.x, d.y, {.epochs = -1}); });
  EXPECT_NE(msg.find("epochs must be >= 0, got -1"), std::string::npos) << msg;
  msg = error_message<ValueError>([&] { model.fit(d.x, d.y.slice(0, 0, 29)); });
  EXPECT_NE(msg.find("(30, 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(29,)"), std::string::npos) << msg;
  for (const auto& [split, text] : std::vector<std::pair<double, std::string>>{
           {1.0, "got 1;"}, {-0.1, "got -0.1;"}, {1.5, "got 1.5;"}, {std::nan(""), "got nan;"}}) {
    msg = error_message<ValueError>([&] { model.fit(d.x, d.y, {.validation_split = split}); });
    EXPECT_NE(msg.find("validation_split must be in [0, 1), " + text), std::string::npos) << msg;
  }
  msg = error_message<ValueError>([&] {
    model.fit(d.x, d.y, {.validation_data = std::pair{d.x, d.y.slice(0, 0, 10)}});
  });
  EXPECT_NE(msg.find("(10,)"), std::string::npos) << msg;
  for (const std::string& m : {msg}) EXPECT_EQ(m.find('\n'), std::string::npos);
  // Nothing trained.
  const std::vector<Tensor> after = model.get_weights();
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].to_vector<float>(), after[i].to_vector<float>());
  }
  // epochs = 0 is valid and does nothing.
  EXPECT_TRUE(model.fit(d.x, d.y, {.epochs = 0}).epochs.empty());
}

}  // namespace
}  // namespace mixprec
