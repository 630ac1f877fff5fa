// compile_config_to_json / compile_options_from_json (include/mixprec/models/model_config.h):
// optimizers with their hyperparameters and learning-rate schedules, LossScaleOptimizer settings,
// losses and metrics by name or object; what cannot be described is a ValueError.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using nlohmann::json;

// Compiles `m` with `options`, then a fresh model with what the JSON gives back: both JSONs equal.
json round_trip(Model m, CompileOptions options) {
  m.compile(std::move(options));
  const std::string text = compile_config_to_json(m);
  Model other = testing::tiny_model(2);
  other.compile(compile_options_from_json(text));
  EXPECT_EQ(compile_config_to_json(other), text);
  return json::parse(text);
}

TEST(CompileConfigTest, AdamWithNamesAndObjects) {
  Model m = testing::tiny_model(1);
  const json j = round_trip(
      m, {.optimizer = optimizers::Adam({.learning_rate = 0.003, .beta_1 = 0.8, .clipnorm = 1.0}),
          .loss = "sparse_categorical_crossentropy",
          .metrics = {"accuracy", metrics::SparseCategoricalAccuracy({.name = "acc2"})}});
  EXPECT_EQ(j["optimizer"]["class_name"], "Adam");
  EXPECT_DOUBLE_EQ(j["optimizer"]["config"]["learning_rate"].get<double>(), 0.003);
  EXPECT_DOUBLE_EQ(j["optimizer"]["config"]["beta_1"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["optimizer"]["config"]["clipnorm"].get<double>(), 1.0);
  EXPECT_TRUE(j["optimizer"]["config"]["clipvalue"].is_null());
  EXPECT_EQ(j["loss"], "sparse_categorical_crossentropy");
  EXPECT_EQ(j["metrics"][0], "accuracy");
  EXPECT_EQ(j["metrics"][1]["class_name"], "SparseCategoricalAccuracy");
  EXPECT_EQ(j["metrics"][1]["config"]["name"], "acc2");
}

TEST(CompileConfigTest, EveryOptimizerAndSchedule) {
  using namespace optimizers;
  json j = round_trip(
      testing::tiny_model(1),
      {.optimizer = SGD({.learning_rate = schedules::ExponentialDecay{0.1, 100, 0.5, true},
                         .momentum = 0.9,
                         .nesterov = true})});
  EXPECT_EQ(j["optimizer"]["class_name"], "SGD");
  EXPECT_EQ(j["optimizer"]["config"]["learning_rate"]["class_name"], "ExponentialDecay");
  EXPECT_EQ(j["optimizer"]["config"]["learning_rate"]["config"]["decay_steps"], 100);
  EXPECT_EQ(j["optimizer"]["config"]["nesterov"], true);
  j = round_trip(testing::tiny_model(1),
                 {.optimizer = AdamW({.learning_rate = schedules::CosineDecay{0.01, 50, 0.1},
                                      .weight_decay = 0.01})});
  EXPECT_EQ(j["optimizer"]["class_name"], "AdamW");
  EXPECT_EQ(j["optimizer"]["config"]["learning_rate"]["class_name"], "CosineDecay");
  j = round_trip(testing::tiny_model(1),
                 {.optimizer = RMSprop({.learning_rate = schedules::ConstantSchedule{0.02},
                                        .rho = 0.8,
                                        .centered = true,
                                        .global_clipnorm = 5.0})});
  EXPECT_EQ(j["optimizer"]["class_name"], "RMSprop");
  EXPECT_EQ(j["optimizer"]["config"]["learning_rate"]["class_name"], "ConstantSchedule");
  EXPECT_EQ(j["optimizer"]["config"]["centered"], true);
}

TEST(CompileConfigTest, TheCurrentConstantLearningRateIsSaved) {
  Model m = testing::tiny_model(1);
  m.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  m.optimizer().set_learning_rate(0.025);  // as ReduceLROnPlateau does
  const json j = json::parse(compile_config_to_json(m));
  EXPECT_DOUBLE_EQ(j["optimizer"]["config"]["learning_rate"].get<double>(), 0.025);
}

TEST(CompileConfigTest, LossScaleOptimizer) {
  {
    testing::PolicyGuard guard("mixed_float16");
    // compile() wraps the default RMSprop in a dynamic LossScaleOptimizer.
    const json j = round_trip(testing::tiny_model(1), {});
    EXPECT_EQ(j["optimizer"]["class_name"], "LossScaleOptimizer");
    EXPECT_EQ(j["optimizer"]["config"]["dynamic"], true);
    EXPECT_EQ(j["optimizer"]["config"]["inner_optimizer"]["class_name"], "RMSprop");
  }
  Model m = testing::tiny_model(1);
  const json j = round_trip(m, {.optimizer = mixed_precision::LossScaleOptimizer(
                                    optimizers::SGD(), {.dynamic = false, .initial_scale = 128})});
  EXPECT_EQ(j["optimizer"]["config"]["dynamic"], false);
  EXPECT_DOUBLE_EQ(j["optimizer"]["config"]["initial_scale"].get<double>(), 128);
  const CompileOptions o = compile_options_from_json(j.dump());
  const auto lso = mixed_precision::as_loss_scale_optimizer(o.optimizer);
  ASSERT_TRUE(lso.has_value());
  EXPECT_FALSE(lso->dynamic());
  EXPECT_DOUBLE_EQ(lso->loss_scale(), 128);
}

TEST(CompileConfigTest, LossObjects) {
  const json j = round_trip(testing::tiny_model(1),
                            {.loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                             .metrics = {metrics::Mean({.name = "m"})}});
  EXPECT_EQ(j["loss"]["class_name"], "SparseCategoricalCrossentropy");
  EXPECT_EQ(j["loss"]["config"]["from_logits"], true);
  const CompileOptions o = compile_options_from_json(j.dump());
  const auto& loss = std::get<losses::Loss>(o.loss);
  // from_logits = true: the loss of logits (0, 0, 0) for class 0 is log(3).
  const Tensor l = loss(from_vector(std::vector<std::int64_t>{0}, {1}), zeros({1, 3}));
  EXPECT_NEAR(l.item(), std::log(3.0), 1e-6);
}

TEST(CompileConfigTest, IgnoreClassWarmupAndWeightDecayExclusionsAreSaved) {
  using namespace optimizers;
  AdamW adamw({.learning_rate = schedules::CosineDecay{.initial_learning_rate = 0.0,
                                                       .decay_steps = 1000,
                                                       .alpha = 0.1,
                                                       .warmup_target = 6e-4,
                                                       .warmup_steps = 100},
               .weight_decay = 0.1,
               .global_clipnorm = 1.0,
               .exclude_from_weight_decay = {"gamma", "beta"}});
  adamw.exclude_from_weight_decay({}, {"bias", "embeddings"});
  const json j = round_trip(
      testing::tiny_model(1),
      {.optimizer = adamw,
       .loss = losses::SparseCategoricalCrossentropy({.from_logits = true, .ignore_class = -100})});
  const json& lr = j["optimizer"]["config"]["learning_rate"]["config"];
  EXPECT_DOUBLE_EQ(lr["warmup_target"].get<double>(), 6e-4);
  EXPECT_EQ(lr["warmup_steps"], 100);
  EXPECT_EQ(j["optimizer"]["config"]["exclude_from_weight_decay"],
            json::array({"gamma", "beta", "bias", "embeddings"}));
  EXPECT_EQ(j["loss"]["config"]["ignore_class"], -100);
  const CompileOptions o = compile_options_from_json(j.dump());
  const auto& loss = std::get<losses::Loss>(o.loss);
  ASSERT_TRUE(loss.get_config()->ignore_class.has_value());
  EXPECT_EQ(*loss.get_config()->ignore_class, -100);
  // The restored loss ignores -100: only position 0 counts, log(3).
  const Tensor l = loss(from_vector(std::vector<std::int64_t>{0, -100}, {2}), zeros({2, 3}));
  EXPECT_NEAR(l.item(), std::log(3.0), 1e-6);
  EXPECT_NEAR(o.optimizer.learning_rate(), 0.0, 0.0);
  // Configs written before these keys existed still load (no ignore_class, no warm-up).
  json old = j;
  old["loss"]["config"].erase("ignore_class");
  old["optimizer"]["config"]["learning_rate"]["config"].erase("warmup_target");
  old["optimizer"]["config"]["learning_rate"]["config"].erase("warmup_steps");
  old["optimizer"]["config"].erase("exclude_from_weight_decay");
  const CompileOptions p = compile_options_from_json(old.dump());
  EXPECT_FALSE(std::get<losses::Loss>(p.loss).get_config()->ignore_class.has_value());
  // A plain loss writes ignore_class null (as Keras 3 does).
  const json k =
      round_trip(testing::tiny_model(1), {.loss = losses::SparseCategoricalCrossentropy()});
  EXPECT_TRUE(k["loss"]["config"]["ignore_class"].is_null());
  // A bad list is refused with the place named.
  json bad = j;
  bad["optimizer"]["config"]["exclude_from_weight_decay"] = json::array({"bias", 3});
  testing::expect_error<ValueError>([&] { (void)compile_options_from_json(bad.dump()); },
                                    {"exclude_from_weight_decay", "[1]"});
}

TEST(CompileConfigTest, WhatCannotBeDescribedIsAValueError) {
  Model m = testing::tiny_model(1);
  testing::expect_error<ValueError>([&] { (void)compile_config_to_json(m); }, {"not compiled"});
  m.compile({.loss = losses::Loss("mine", [](const Tensor& y, const Tensor& p) {
               return losses::get("sparse_categorical_crossentropy")(y, p);
             })});
  testing::expect_error<ValueError>([&] { (void)compile_config_to_json(m); },
                                    {"the loss 'mine' is a custom function"});
  m.compile({.optimizer = optimizers::SGD(
                 {.learning_rate = [](std::int64_t step) { return 0.1 / double(step + 1); }})});
  testing::expect_error<ValueError>([&] { (void)compile_config_to_json(m); },
                                    {"learning-rate schedule is a custom function"});
}

TEST(CompileConfigTest, InvalidConfigs) {
  Model m = testing::tiny_model(1);
  m.compile({.optimizer = optimizers::Adam(), .metrics = {"accuracy"}});
  const json good = json::parse(compile_config_to_json(m));
  const auto refused = [](const json& j, const std::string& expected) {
    testing::expect_error<ValueError>([&] { (void)compile_options_from_json(j.dump()); },
                                      {expected});
  };
  testing::expect_error<ValueError>([] { (void)compile_options_from_json("{"); },
                                    {"compile config: not valid JSON"});
  json j = good;
  j["optimizer"]["class_name"] = "Adagrad";
  refused(j,
          R"("class_name" must be SGD, Adam, AdamW, RMSprop or LossScaleOptimizer, got "Adagrad")");
  j = good;
  j["optimizer"]["config"]["beta_1"] = 1.0;
  refused(j, R"("beta_1" must be a number in [0, 1), got 1.0)");
  j = good;
  j["optimizer"]["config"]["learning_rate"] = -1;
  refused(j, R"("learning_rate" must be a number >= 0, got -1)");
  j = good;
  j["optimizer"]["config"]["amsgrad"] = true;
  refused(j, R"(unknown key "amsgrad")");
  j = good;
  j["loss"] = "hinge";
  refused(j, R"("loss" must be a loss name)");
  j = good;
  j["metrics"] = json::array({"auc"});
  refused(j, R"(compile config: "metrics"[0]: must be a metric name)");
  j = good;
  j.erase("loss");
  refused(j, R"(missing key "loss")");
  j = good;
  j["optimizer"] = json::parse(
      R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": {"class_name": "LossScaleOptimizer", "config": {}}, "dynamic": true, "initial_scale": null, "dynamic_growth_steps": null}})");
  refused(j, R"("class_name" must be SGD, Adam, AdamW or RMSprop, got "LossScaleOptimizer")");
}

}  // namespace
}  // namespace mixprec
