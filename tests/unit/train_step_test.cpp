// The training step in plain steps (src/models/train_step.h): the pieces compose to train_step,
// the per-fit StepContext, fit() and evaluate() each counting into their own metric state, and
// compile_optimizer(), the loss-scaling rule compile() and the CLI's custom loop share.
#include "models/train_step.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/mixprec.h"
#include "models/training_state.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::PolicyGuard;

const std::vector<float> kX = {0.5f, -1.0f, 1.5f, 0.25f, -0.75f, 2.0f,  1.0f,  1.0f,  -2.0f, 0.5f,
                               0.0f, 0.3f,  0.9f, -1.2f, 1.7f,   -0.4f, -0.3f, -0.8f, 0.6f,  0.6f};
const std::vector<std::int64_t> kLabels = {0, 2, 1, 0, 2, 1, 0, 0, 1, 2};
const std::vector<float> kKernel = {0.8f, -0.5f, 0.1f, -0.3f, 0.9f, 0.4f};  // (2, 3)
const std::vector<float> kBias = {0.05f, -0.1f, 0.2f};

// A 2 -> 3 softmax classifier with fixed weights.
Model classifier(const std::string& name = "model") {
  auto in = Input({2});
  auto logits = layers::Dense(3, {.name = name + "_d"})(in);
  Model model(in, layers::Activation("softmax", {.dtype = "float32"})(logits), {.name = name});
  model.get_layer(name + "_d").set_weights({from_vector(kKernel, {2, 3}), from_vector(kBias, {3})});
  return model;
}

Tensor x_all() { return from_vector(kX, {10, 2}); }

// The labels the classifier predicts (shifted by `shift` classes): accuracy 1 for shift 0, 0 else.
Tensor predicted_labels(Model& model, std::int64_t shift) {
  const std::vector<float> p = model.predict(x_all()).to_vector<float>();
  std::vector<std::int64_t> labels;
  for (std::size_t i = 0; i < 10; ++i) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < 3; ++c) {
      if (p[i * 3 + static_cast<std::size_t>(c)] > p[i * 3 + static_cast<std::size_t>(best)]) {
        best = c;
      }
    }
    labels.push_back((best + shift) % 3);
  }
  return from_vector(labels, {10});
}

std::vector<float> flat_weights(const Model& model) {
  std::vector<float> out;
  for (const Tensor& w : model.get_weights()) {
    const std::vector<float> v = w.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(TrainStepTest, ThePiecesComposeToTrainStep) {
  PolicyGuard guard("float32");
  clear_session();
  Model whole = classifier("whole"), pieces = classifier("pieces");
  const Tensor x = x_all(), y = from_vector(kLabels, {10});
  whole.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  pieces.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  models::StepContext a(whole, *whole.model_impl().training);
  models::StepContext b(pieces, *pieces.model_impl().training);
  EXPECT_EQ(a.device, Device::cpu());
  EXPECT_EQ(a.loss_scale, nullptr);  // float32: no loss scaling
  EXPECT_FALSE(a.variables.has_value());
  for (int step = 0; step < 3; ++step) {
    models::train_step(a, x, y, {1, step + 1});
    const models::StepBatch batch = models::to_step_device(b, x, y);
    const Tensor y_pred = models::forward(b, batch.x);
    const Tensor loss = models::compute_loss(b, batch.y, y_pred);
    models::optimizer_step(b, models::backward(b, loss));
    b.state.train_metrics.update(loss, 10, batch.y, y_pred);
  }
  ASSERT_TRUE(a.variables.has_value());
  EXPECT_EQ(a.variables->size(), 2u);  // listed by the first step, kept by the others
  EXPECT_EQ(flat_weights(whole), flat_weights(pieces));
  EXPECT_NE(flat_weights(whole), flat_weights(classifier("untrained")));
  EXPECT_EQ(a.state.train_metrics.results(), b.state.train_metrics.results());
}

TEST(TrainStepTest, ABatchAlreadyOnTheModelsDeviceIsNotMoved) {
  PolicyGuard guard("float32");
  clear_session();
  Model model = classifier();
  model.compile({.optimizer = optimizers::SGD()});
  const models::StepContext ctx(model, *model.model_impl().training);
  const Tensor x = x_all(), y = from_vector(kLabels, {10});
  const models::StepBatch batch = models::to_step_device(ctx, x, y);
  EXPECT_EQ(batch.x.data_ptr(), x.data_ptr());
  EXPECT_EQ(batch.y.data_ptr(), y.data_ptr());
}

TEST(TrainStepTest, ValidationDuringFitLeavesTheTrainingMetricsAlone) {
  PolicyGuard guard("float32");
  clear_session();
  Model model = classifier();
  const Tensor right = predicted_labels(model, 0), wrong = predicted_labels(model, 1);
  metrics::Metric acc = metrics::SparseCategoricalAccuracy({.name = "acc"});
  // Learning rate 0: the weights stay, so the training accuracy is 1 and the validation one 0.
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.0}), .metrics = {acc}});
  const History h = model.fit(x_all(), right,
                              {.batch_size = 4,
                               .epochs = 1,
                               .verbose = Verbosity::silent,
                               .validation_data = std::make_pair(x_all(), wrong),
                               .shuffle = false});
  ASSERT_EQ(h.history.at("acc").size(), 1u);
  EXPECT_EQ(h.history.at("acc")[0], 1.0);
  EXPECT_EQ(h.history.at("val_acc")[0], 0.0);
  // The validation pass ran after the epoch's batches and did not reset or refill these.
  EXPECT_EQ(acc.result(), 1.0);
  const auto train = model.model_impl().training->train_metrics.results();
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train[0].first, "loss");
  EXPECT_DOUBLE_EQ(train[0].second, h.history.at("loss")[0]);
  EXPECT_EQ(train[1].second, 1.0);
  const auto test = model.model_impl().training->test_metrics.results();
  EXPECT_DOUBLE_EQ(test[0].second, h.history.at("val_loss")[0]);
  EXPECT_EQ(test[1].second, 0.0);
}

TEST(TrainStepTest, EvaluateLeavesTrainOnBatchMetricsAlone) {
  PolicyGuard guard("float32");
  clear_session();
  Model model = classifier();
  const Tensor right = predicted_labels(model, 0), wrong = predicted_labels(model, 2);
  metrics::Metric acc = metrics::SparseCategoricalAccuracy({.name = "acc"});
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.0}), .metrics = {acc}});
  const Scores trained = model.train_on_batch(x_all(), right);
  EXPECT_EQ(trained.at("acc"), 1.0);
  const Scores evaluated = model.evaluate(x_all(), wrong, {.verbose = Verbosity::silent});
  EXPECT_EQ(evaluated.at("acc"), 0.0);
  EXPECT_EQ(acc.result(), 1.0);
  EXPECT_EQ(model.model_impl().training->train_metrics.results(), trained.values);
}

TEST(TrainStepTest, EvaluateCountsIntoMetricsOfTheSameKindsAndOptions) {
  PolicyGuard guard("float32");
  clear_session();
  // sigmoid(x0 - x1): 0.82 0.78 0.06 0.5 0.08 0.43 0.89 0.89 0.62 0.5 on kX; every target 0.
  auto in = Input({2});
  Model model(in, layers::Dense(1, {.activation = "sigmoid", .name = "d"})(in));
  model.get_layer("d").set_weights({from_vector(std::vector<float>{1.0f, -1.0f}, {2, 1}),
                                    from_vector(std::vector<float>{0.0f}, {1})});
  const Tensor y = zeros({10, 1});
  // Objects of two kinds, one with an option only BinaryAccuracy knows, and a name.
  metrics::Metric low = metrics::BinaryAccuracy({.name = "low", .threshold = 0.3});
  metrics::Metric half = metrics::BinaryAccuracy({.name = "half"});
  metrics::Metric exact = metrics::Accuracy({.name = "exact"});
  model.compile({.optimizer = optimizers::SGD(),
                 .loss = std::string("binary_crossentropy"),
                 .metrics = {low, half, exact, std::string("accuracy")}});
  const Scores s = model.evaluate(x_all(), y, {.batch_size = 3, .verbose = Verbosity::silent});
  ASSERT_EQ(s.values.size(), 5u);
  EXPECT_EQ(s.values[1].first, "low");
  EXPECT_EQ(s.values[2].first, "half");
  EXPECT_EQ(s.values[3].first, "exact");
  EXPECT_EQ(s.values[4].first, "accuracy");
  EXPECT_DOUBLE_EQ(s.at("low"), 0.2);   // 8 of 10 above 0.3
  EXPECT_DOUBLE_EQ(s.at("half"), 0.5);  // 5 of 10 above 0.5
  EXPECT_DOUBLE_EQ(s.at("exact"), 0.0);
  EXPECT_DOUBLE_EQ(s.at("accuracy"), 0.5);  // binary_crossentropy: BinaryAccuracy at 0.5
  // The evaluate pass did not touch the compiled objects.
  EXPECT_EQ(low.result(), 0.0);
  EXPECT_EQ(half.result(), 0.0);
  // A training step counts into them.
  model.train_on_batch(x_all(), y);
  EXPECT_DOUBLE_EQ(low.result(), 0.2);
  EXPECT_DOUBLE_EQ(half.result(), 0.5);
}

TEST(TrainStepTest, CompileOptimizerWrapsOnlyUnderMixedFloat16) {
  const auto model_under = [](const char* policy) {
    PolicyGuard guard(policy);
    clear_session();
    auto in = Input({2});
    return Model(in, layers::Dense(3)(in));
  };
  for (const char* policy : {"float32", "mixed_bfloat16", "float16", "bfloat16"}) {
    const Model model = model_under(policy);
    const optimizers::Optimizer sgd = optimizers::SGD();
    EXPECT_FALSE(mixed_precision::as_loss_scale_optimizer(compile_optimizer(model, sgd))) << policy;
  }
  const Model mixed = model_under("mixed_float16");
  const auto wrapped = mixed_precision::as_loss_scale_optimizer(
      compile_optimizer(mixed, optimizers::SGD({.learning_rate = 0.25})));
  ASSERT_TRUE(wrapped.has_value());
  EXPECT_TRUE(wrapped->dynamic());
  EXPECT_EQ(wrapped->learning_rate(), 0.25);
  // An optimizer that already scales the loss is kept as it is (its fixed scale too).
  const mixed_precision::LossScaleOptimizer fixed(optimizers::SGD(),
                                                  {.dynamic = false, .initial_scale = 8.0});
  const auto kept = mixed_precision::as_loss_scale_optimizer(compile_optimizer(mixed, fixed));
  ASSERT_TRUE(kept.has_value());
  EXPECT_FALSE(kept->dynamic());
  EXPECT_EQ(kept->loss_scale(), 8.0);
  // Undefined: compile()'s default, RMSprop (wrapped under mixed_float16).
  const Model plain = model_under("float32");
  EXPECT_TRUE(compile_optimizer(plain).defined());
  EXPECT_TRUE(mixed_precision::as_loss_scale_optimizer(compile_optimizer(mixed)).has_value());
}

TEST(TrainStepTest, CompileInstallsWhatCompileOptimizerReturns) {
  PolicyGuard guard("mixed_float16");
  clear_session();
  auto in = Input({2});
  Model model(in, layers::Activation("linear", {.dtype = "float32"})(layers::Dense(3)(in)));
  model.compile({.optimizer = optimizers::SGD(), .loss = std::string("mean_squared_error")});
  EXPECT_TRUE(mixed_precision::as_loss_scale_optimizer(model.optimizer()).has_value());
  const models::StepContext ctx(model, *model.model_impl().training);
  EXPECT_NE(ctx.loss_scale, nullptr);
}

}  // namespace
}  // namespace mixprec
