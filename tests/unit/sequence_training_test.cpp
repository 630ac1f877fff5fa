// fit/evaluate with (batch, time) integer labels and (batch, time, vocab) logits, as a language
// model trains: Dense on (batch, time, features) float input (no Embedding needed), the fused
// SparseCategoricalCrossentropy(from_logits, ignore_class) and the "accuracy" metric, which
// counts every position (Keras 3's SparseCategoricalAccuracy has no ignore_class).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::PolicyGuard;

constexpr std::int64_t kN = 12, kT = 5, kC = 4, kV = 6;
constexpr std::int64_t kIgnore = -1;

// Features whose arg-max (over the first kC... classes) tells the token: token = (t + n) % kV,
// features one-hot-ish on token % kC plus a time signal, so a linear map can learn most of it.
struct Sequences {
  Tensor x;  // (kN, kT, kC) float32
  Tensor y;  // (kN, kT) int64, the last position of every other sequence ignored
};

Sequences make_sequences() {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t n = 0; n < kN; ++n) {
    for (std::int64_t t = 0; t < kT; ++t) {
      const std::int64_t token = (t + n) % kV;
      for (std::int64_t c = 0; c < kC; ++c) {
        x.push_back(c == token % kC ? 1.0f : 0.0f);
      }
      x.back() += token >= kC ? 1.0f : 0.0f;  // tells 4, 5 from 0, 1
      y.push_back(t == kT - 1 && n % 2 == 0 ? kIgnore : token);
    }
  }
  return {from_vector(x, {kN, kT, kC}), from_vector(y, {kN, kT})};
}

Model sequence_model() {
  clear_session();
  set_seed(3);
  auto in = Input({kT, kC});
  // Under a mixed policy the logits are 16-bit: the loss reads them in their dtype.
  auto logits = layers::Dense(
      kV, {.name = "logits"})(layers::Dense(16, {.activation = "relu", .name = "hidden"})(in));
  return Model(in, logits);
}

TEST(SequenceTrainingTest, FitOnTimeStepLabelsLearnsAndAccuracyCountsEveryPosition) {
  for (const char* policy : {"float32", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    PolicyGuard guard(policy);
    const Sequences data = make_sequences();
    Model model = sequence_model();
    model.compile({.optimizer = optimizers::AdamW({.learning_rate = 0.05, .global_clipnorm = 1.0}),
                   .loss = losses::SparseCategoricalCrossentropy(
                       {.from_logits = true, .ignore_class = kIgnore}),
                   .metrics = {"accuracy"}});
    const History h =
        model.fit(data.x, data.y, {.batch_size = 4, .epochs = 40, .verbose = Verbosity::silent});
    EXPECT_LT(h.history.at("loss").back(), 0.5 * h.history.at("loss").front());
    // evaluate's accuracy against argmax(predict) == label over all kN * kT positions (ignored
    // ones included: their label -1 never matches).
    const Scores s =
        model.evaluate(data.x, data.y, {.batch_size = kN, .verbose = Verbosity::silent});
    const Tensor p = model.predict(data.x, {.batch_size = kN});
    ASSERT_EQ(p.shape(), Shape({kN, kT, kV}));
    const std::vector<double> pv = p.to_vector<double>();
    const std::vector<std::int64_t> yv = data.y.to_vector<std::int64_t>();
    double correct = 0, loss = 0, kept = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) {
      const auto row = pv.begin() + static_cast<std::ptrdiff_t>(i * kV);
      const auto best = std::max_element(row, row + kV) - row;
      correct += best == yv[i] ? 1 : 0;
      if (yv[i] == kIgnore) continue;
      const double m = *std::max_element(row, row + kV);
      double total = 0;
      for (std::int64_t c = 0; c < kV; ++c) total += std::exp(row[c] - m);
      loss += m + std::log(total) - row[yv[i]];
      ++kept;
    }
    EXPECT_DOUBLE_EQ(s.at("accuracy"), correct / static_cast<double>(kN * kT));
    EXPECT_NEAR(s.at("loss"), loss / kept, 1e-5 * std::max(1.0, loss / kept));
    EXPECT_GT(s.at("accuracy"), 0.6);
  }
}

}  // namespace
}  // namespace mixprec
