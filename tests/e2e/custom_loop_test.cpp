// The seed's custom training loop (DESIGN §1, second listing): GradientTape + LossScaleOptimizer
// under mixed_float16, written here with only public calls. Started from the same weights and fed
// the same batches (a BatchLoader with fit()'s shuffling seed), it must train exactly as fit()
// does: the same final weights, loss scale and skipped steps, and the same test accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::LossScaleOptimizer;

using testing::PolicyGuard;

struct Data {
  Tensor x;  // (n, 2) float32
  Tensor y;  // (n,) int64
};

// XOR: clusters at (+-1, +-1) with noise 0.25; class 1 where x0 * x1 > 0.
Data xor_data(std::int64_t n, std::uint64_t seed) {
  Generator g(seed);
  std::vector<float> xs;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = (i % 2) ? 1.0 : -1.0;
    const double b = ((i / 2) % 2) ? 1.0 : -1.0;
    xs.push_back(static_cast<float>(a + 0.25 * g.normal()));
    xs.push_back(static_cast<float>(b + 0.25 * g.normal()));
    labels.push_back(a * b > 0 ? 1 : 0);
  }
  return {from_vector(xs, {n, 2}), from_vector(labels, {n})};
}

Model make_model() {
  clear_session();
  set_seed(99);
  auto inputs = Input({2}, {.name = "digits"});
  auto x = layers::Dense(16, {.activation = "relu", .name = "dense_1"})(inputs);
  x = layers::Dense(2, {.name = "dense_logits"})(x);
  auto outputs = layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  return Model(inputs, outputs);
}

class CustomLoopTest : public ::testing::TestWithParam<double> {};

TEST_P(CustomLoopTest, SeedLoopTrainsExactlyAsFit) {
  PolicyGuard guard("mixed_float16");
  const double initial_scale = GetParam();
  const Data train = xor_data(256, 3);
  const Data test = xor_data(400, 4);
  constexpr int kEpochs = 12;
  constexpr std::int64_t kBatch = 16;
  constexpr std::uint64_t kShuffleSeed = 42;
  const optimizers::RMSpropOptions rmsprop{.learning_rate = 0.01};

  Model model = make_model();
  const std::vector<Tensor> initial_weights = model.get_weights();

  // ---- fit ----
  LossScaleOptimizer fit_opt(optimizers::RMSprop(rmsprop), {.initial_scale = initial_scale});
  model.compile({.optimizer = fit_opt, .metrics = {"accuracy"}});
  const History history = model.fit(train.x, train.y,
                                    {.batch_size = kBatch,
                                     .epochs = kEpochs,
                                     .verbose = Verbosity::silent,
                                     .seed = kShuffleSeed});
  const std::vector<Tensor> fit_weights = model.get_weights();
  const Scores fit_scores = model.evaluate(test.x, test.y, {.verbose = Verbosity::silent});

  // ---- the seed's custom loop ----
  model.set_weights(initial_weights);
  auto optimizer =
      LossScaleOptimizer(optimizers::RMSprop(rmsprop), {.initial_scale = initial_scale});
  losses::SparseCategoricalCrossentropy loss_object;
  data::BatchLoader train_dataset(data::Dataset(train.x, train.y),
                                  {.batch_size = kBatch, .seed = kShuffleSeed});
  data::Dataset test_dataset(test.x, test.y);
  double test_accuracy_result = 0.0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    metrics::Mean epoch_loss_avg;
    metrics::SparseCategoricalAccuracy test_accuracy({.name = "test_accuracy"});
    for (const data::Batch& b : train_dataset.next_epoch()) {
      GradientTape tape;
      const Tensor predictions = model(b.x, {.training = true});
      const Tensor loss = loss_object(b.y, predictions);
      const Tensor scaled_loss = optimizer.get_scaled_loss(loss);
      const std::vector<Tensor> scaled_gradients =
          tape.gradient(scaled_loss, model.trainable_variables());
      const std::vector<Tensor> gradients = optimizer.get_unscaled_gradients(scaled_gradients);
      optimizer.apply_gradients(gradients, model.trainable_variables());
      epoch_loss_avg.update_state(loss);
    }
    {
      NoGradScope no_grad;
      for (const data::Batch& b : test_dataset.batches(100)) {
        test_accuracy.update_state(b.y, model(b.x, {.training = false}));
      }
    }
    // Every batch has 16 samples, so the plain mean of batch losses is fit()'s weighted mean.
    EXPECT_NEAR(epoch_loss_avg.result(),
                history.history.at("loss")[static_cast<std::size_t>(epoch)], 1e-6)
        << "epoch " << epoch + 1;
    test_accuracy_result = test_accuracy.result();
  }

  // The same arithmetic in the same order: identical weights.
  const std::vector<Tensor> loop_weights = model.get_weights();
  ASSERT_EQ(loop_weights.size(), fit_weights.size());
  for (std::size_t i = 0; i < loop_weights.size(); ++i) {
    EXPECT_EQ(loop_weights[i].to_vector<float>(), fit_weights[i].to_vector<float>()) << i;
  }
  EXPECT_EQ(optimizer.loss_scale(), fit_opt.loss_scale());
  EXPECT_EQ(optimizer.skipped_steps(), fit_opt.skipped_steps());
  std::int64_t fit_skipped = 0;
  for (const EpochLog& e : history.epochs) fit_skipped += e.skipped_steps;
  EXPECT_EQ(optimizer.skipped_steps(), fit_skipped);
  // 2^40 times a logits gradient of ~0.03 overflows float16 until the scale is below ~2^21.
  if (initial_scale > 65536.0) EXPECT_GE(fit_skipped, 15);
  EXPECT_EQ(test_accuracy_result, fit_scores.at("accuracy"));
  EXPECT_GE(test_accuracy_result, 0.95);
}

// 32768: Keras's default, no step skipped here. 2^40: the first ~20 steps overflow float16 and
// are skipped by both loops alike.
INSTANTIATE_TEST_SUITE_P(InitialScales, CustomLoopTest,
                         ::testing::Values(32768.0, std::ldexp(1.0, 40)), [](const auto& info) {
                           return "scale_2_pow_" + std::to_string(std::ilogb(info.param));
                         });

}  // namespace
}  // namespace mixprec
