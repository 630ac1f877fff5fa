// compile/evaluate/predict/train_on_batch on small models whose weights the test sets, with the
// expected losses, accuracies and SGD updates computed here in double from those weights.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;

using testing::PolicyGuard;

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

// x (10, 2), labels (10,), and a 2 -> 3 softmax classifier with fixed weights.
const std::vector<float> kX = {0.5f, -1.0f, 1.5f, 0.25f, -0.75f, 2.0f,  1.0f,  1.0f,  -2.0f, 0.5f,
                               0.0f, 0.3f,  0.9f, -1.2f, 1.7f,   -0.4f, -0.3f, -0.8f, 0.6f,  0.6f};
const std::vector<std::int64_t> kLabels = {0, 2, 1, 0, 2, 1, 0, 0, 1, 2};
const std::vector<float> kKernel = {0.8f, -0.5f, 0.1f, -0.3f, 0.9f, 0.4f};  // (2, 3)
const std::vector<float> kBias = {0.05f, -0.1f, 0.2f};

Model softmax_classifier() {
  clear_session();
  auto in = Input({2});
  auto logits = layers::Dense(3, {.name = "d"})(in);
  Model model(in, layers::Activation("softmax", {.dtype = "float32"})(logits));
  model.get_layer("d").set_weights({from_vector(kKernel, {2, 3}), from_vector(kBias, {3})});
  return model;
}

// Per-sample probabilities of softmax_classifier(), in double.
std::vector<std::vector<double>> expected_probabilities() {
  std::vector<std::vector<double>> p;
  for (std::size_t i = 0; i < kLabels.size(); ++i) {
    std::vector<double> z(3);
    double total = 0.0;
    for (int c = 0; c < 3; ++c) {
      z[c] = kBias[c] + kX[2 * i] * kKernel[c] + kX[2 * i + 1] * kKernel[3 + c];
    }
    const double m = std::max({z[0], z[1], z[2]});
    for (double& v : z) total += (v = std::exp(v - m));
    for (double& v : z) v /= total;
    p.push_back(z);
  }
  return p;
}

TEST(TrainingTest, ScoresAtFindsNamesAndListsThemWhenMissing) {
  const Scores s{{{"loss", 0.5}, {"accuracy", 0.75}}};
  EXPECT_EQ(s.at("accuracy"), 0.75);
  EXPECT_EQ(s[0], 0.5);
  const std::string msg = error_message<ValueError>([&] { s.at("acc"); });
  EXPECT_NE(msg.find("'acc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loss, accuracy"), std::string::npos) << msg;
}

TEST(TrainingTest, EvaluateIsTheSampleMeanOverUnevenBatches) {
  PolicyGuard guard("float32");
  Model model = softmax_classifier();
  model.compile({.optimizer = optimizers::SGD(),
                 .metrics = {"accuracy", metrics::SparseCategoricalAccuracy({.name = "sca"})}});
  const auto p = expected_probabilities();
  double loss = 0.0, correct = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    loss -= std::log(p[i][static_cast<std::size_t>(kLabels[i])]);
    const auto best = std::max_element(p[i].begin(), p[i].end()) - p[i].begin();
    correct += best == kLabels[i] ? 1.0 : 0.0;
  }
  loss /= 10.0;
  // Batches of 4, 4 and 2: the mean of batch means would weight the last two samples double.
  const Scores s = model.evaluate(from_vector(kX, {10, 2}), from_vector(kLabels, {10}),
                                  {.batch_size = 4, .verbose = Verbosity::silent});
  ASSERT_EQ(s.values.size(), 3u);
  EXPECT_EQ(s.values[0].first, "loss");
  EXPECT_EQ(s.values[1].first, "accuracy");
  EXPECT_EQ(s.values[2].first, "sca");
  EXPECT_NEAR(s[0], loss, 1e-6);
  EXPECT_DOUBLE_EQ(s[1], correct / 10.0);
  EXPECT_DOUBLE_EQ(s[2], correct / 10.0);
}

TEST(TrainingTest, PredictConcatenatesBatchesInOrder) {
  PolicyGuard guard("float32");
  Model model = softmax_classifier();  // predict needs no compile(), as in Keras
  const Tensor out = model.predict(from_vector(kX, {10, 2}), {.batch_size = 3});
  ASSERT_EQ(out.shape(), Shape({10, 3}));
  EXPECT_EQ(out.dtype(), kFloat32);
  EXPECT_FALSE(out.requires_grad());
  const std::vector<double> got = out.to_vector<double>();
  const auto p = expected_probabilities();
  for (std::size_t i = 0; i < 10; ++i) {
    for (std::size_t c = 0; c < 3; ++c) EXPECT_NEAR(got[i * 3 + c], p[i][c], 1e-6) << i;
  }
  EXPECT_THROW(model.predict(from_vector(kX, {10, 2}), {.batch_size = 0}), ValueError);
  EXPECT_THROW(model.predict(Tensor()), ValueError);
}

TEST(TrainingTest, TrainOnBatchIsOneSgdStepAndReturnsThePreStepLoss) {
  PolicyGuard guard("float32");
  clear_session();
  auto in = Input({2});
  Model model(in, layers::Dense(1, {.name = "lin"})(in));
  const std::vector<float> w = {0.4f, -0.2f};
  const float b = 0.1f;
  model.get_layer("lin").set_weights(
      {from_vector(w, {2, 1}), from_vector(std::vector<float>{b}, {1})});
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .loss = "mse"});
  const std::vector<float> x = {1.0f, 2.0f, -1.0f, 0.5f, 0.0f, -3.0f, 2.0f, 1.0f};
  const std::vector<float> y = {0.5f, -0.5f, 1.0f, 0.0f};
  // pred_i = x_i . w + b; loss = mean (pred - y)^2; dL/dw = 2/N sum (pred - y) x_i.
  double loss = 0.0, gw0 = 0.0, gw1 = 0.0, gb = 0.0;
  for (int i = 0; i < 4; ++i) {
    const double r = x[2 * i] * w[0] + x[2 * i + 1] * w[1] + b - y[i];
    loss += r * r / 4.0;
    gw0 += 2.0 * r * x[2 * i] / 4.0;
    gw1 += 2.0 * r * x[2 * i + 1] / 4.0;
    gb += 2.0 * r / 4.0;
  }
  const Scores s = model.train_on_batch(from_vector(x, {4, 2}), from_vector(y, {4, 1}));
  ASSERT_EQ(s.values.size(), 1u);
  EXPECT_NEAR(s.at("loss"), loss, 1e-6);
  const std::vector<Tensor> after = model.get_weights();
  const std::vector<double> w_after = after[0].to_vector<double>();
  EXPECT_NEAR(w_after[0], w[0] - 0.1 * gw0, 1e-6);
  EXPECT_NEAR(w_after[1], w[1] - 0.1 * gw1, 1e-6);
  EXPECT_NEAR(after[1].item(), b - 0.1 * gb, 1e-6);
  EXPECT_EQ(model.optimizer().iterations(), 1);
}

TEST(TrainingTest, TrainOnBatchResetsTheMetricsEachCall) {
  PolicyGuard guard("float32");
  Model model = softmax_classifier();
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.0}), .metrics = {"accuracy"}});
  const auto p = expected_probabilities();
  // With a zero learning rate the predictions stay put: each call's accuracy is its own batch's.
  for (std::int64_t start : {0, 5}) {
    double correct = 0.0;
    for (std::size_t i = static_cast<std::size_t>(start); i < static_cast<std::size_t>(start) + 5;
         ++i) {
      correct += (std::max_element(p[i].begin(), p[i].end()) - p[i].begin()) == kLabels[i];
    }
    const Scores s = model.train_on_batch(from_vector(kX, {10, 2}).slice(0, start, start + 5),
                                          from_vector(kLabels, {10}).slice(0, start, start + 5));
    EXPECT_DOUBLE_EQ(s.at("accuracy"), correct / 5.0) << start;
  }
}

TEST(TrainingTest, FrozenLayersKeepTheirWeights) {
  PolicyGuard guard("mixed_float16");
  clear_session();
  set_seed(4);
  auto in = Input({2});
  layers::Dense frozen(8, {.activation = "relu", .name = "frozen"});
  auto x = frozen(in);
  x = layers::Dense(3, {.name = "head"})(x);
  Model model(in, layers::Activation("softmax", {.dtype = "float32"})(x));
  frozen.set_trainable(false);
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.01})});
  const std::vector<Tensor> frozen_before = frozen.get_weights();
  const std::vector<Tensor> head_before = model.get_layer("head").get_weights();
  model.fit(from_vector(kX, {10, 2}), from_vector(kLabels, {10}),
            {.batch_size = 5, .epochs = 3, .verbose = Verbosity::silent});
  const std::vector<Tensor> frozen_after = frozen.get_weights();
  for (std::size_t i = 0; i < frozen_before.size(); ++i) {
    EXPECT_EQ(frozen_before[i].to_vector<float>(), frozen_after[i].to_vector<float>());
  }
  EXPECT_NE(head_before[0].to_vector<float>(),
            model.get_layer("head").get_weights()[0].to_vector<float>());
}

TEST(TrainingTest, UnbuiltSequentialIsBuiltByItsFirstStep) {
  PolicyGuard guard("float32");
  clear_session();
  set_seed(8);
  Sequential model(
      {layers::Dense(8, {.activation = "relu"}), layers::Dense(3), layers::Activation("softmax")});
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.05}), .metrics = {"accuracy"}});
  const History h = model.fit(from_vector(kX, {10, 2}), from_vector(kLabels, {10}),
                              {.batch_size = 10, .epochs = 30, .verbose = Verbosity::silent});
  EXPECT_EQ(model.count_params(), 2 * 8 + 8 + 8 * 3 + 3);
  EXPECT_LT(h.history.at("loss").back(), 0.5 * h.history.at("loss").front());
}

TEST(TrainingTest, CompileValidatesLossAndMetrics) {
  PolicyGuard guard("float32");
  Model model = softmax_classifier();
  EXPECT_FALSE(model.optimizer().defined());
  std::string msg = error_message<ValueError>([&] {
    model.compile({.metrics = {"accuracy", metrics::Mean({.name = "accuracy"})}});
  });
  EXPECT_NE(msg.find("two metrics named 'accuracy'"), std::string::npos) << msg;
  msg = error_message<ValueError>([&] { model.compile({.metrics = {metrics::Metric()}}); });
  EXPECT_NE(msg.find("undefined Metric"), std::string::npos) << msg;
  msg = error_message<ValueError>([&] { model.compile({.loss = losses::Loss()}); });
  EXPECT_NE(msg.find("undefined Loss"), std::string::npos) << msg;
  EXPECT_THROW(model.compile({.loss = "no_such_loss"}), ValueError);
  EXPECT_THROW(model.compile({.metrics = {"no_such_metric"}}), ValueError);
  EXPECT_FALSE(model.optimizer().defined());  // failed compiles install nothing
  // "accuracy" resolves by the loss: categorical targets under categorical_crossentropy.
  model.compile({.loss = "categorical_crossentropy", .metrics = {"accuracy"}});
  EXPECT_EQ(model.optimizer().name(), "rmsprop");
  const Tensor onehot = one_hot(from_vector(kLabels, {10}), 3);
  const Scores s = model.evaluate(from_vector(kX, {10, 2}), onehot, {.verbose = Verbosity::silent});
  const auto p = expected_probabilities();
  double correct = 0.0;
  for (std::size_t i = 0; i < 10; ++i) {
    correct += (std::max_element(p[i].begin(), p[i].end()) - p[i].begin()) == kLabels[i];
  }
  EXPECT_DOUBLE_EQ(s.at("accuracy"), correct / 10.0);
}

TEST(TrainingTest, EvaluateAndTrainOnBatchValidateFirst) {
  PolicyGuard guard("float32");
  Model model = softmax_classifier();
  const Tensor x = from_vector(kX, {10, 2});
  const Tensor y = from_vector(kLabels, {10});
  EXPECT_THROW(model.evaluate(x, y), ValueError);        // not compiled
  EXPECT_THROW(model.train_on_batch(x, y), ValueError);  // not compiled
  model.compile({});
  EXPECT_THROW(model.evaluate(x, y, {.batch_size = -1}), ValueError);
  const std::string msg = error_message<ValueError>([&] { model.evaluate(x, y.slice(0, 0, 7)); });
  EXPECT_NE(msg.find("(10, 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(7,)"), std::string::npos) << msg;
  EXPECT_THROW(model.train_on_batch(x.slice(0, 0, 0), y.slice(0, 0, 0)), ValueError);
}

TEST(TrainingTest, MultiOutputModelsAreRejectedWithAHint) {
  PolicyGuard guard("float32");
  clear_session();
  auto in = Input({2});
  Model model(in, std::vector<KerasTensor>{layers::Dense(3)(in), layers::Dense(2)(in)});
  model.compile({});
  const std::string msg = error_message<ValueError>([&] {
    model.fit(from_vector(kX, {10, 2}), from_vector(kLabels, {10}));
  });
  EXPECT_NE(msg.find("one input and one output"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GradientTape"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mixprec
