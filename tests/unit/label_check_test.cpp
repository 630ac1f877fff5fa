// A class label out of range is reported at its index in the data the user passed to fit() or
// evaluate(), not at its position in a shuffled batch, before any step changes the model.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

Tensor labels_with(std::int64_t n, std::int64_t index, std::int64_t value) {
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = i % 3;
  y[static_cast<std::size_t>(index)] = value;
  return from_vector(y, {n});
}

TEST(LabelCheckTest, FitNamesTheSampleIndexInY) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD()});
  const auto data = testing::blobs(48, 2);
  const std::vector<Tensor> before = model.get_weights();
  // Batch 8, shuffled: the bad sample lands at some position of some batch; the message must
  // name index 37 of y whatever that position is.
  testing::expect_error<ValueError>(
      [&] {
        model.fit(data.x, labels_with(48, 37, 7),
                  {.batch_size = 8, .epochs = 1, .verbose = Verbosity::silent});
      },
      {"fit()", "y[37] is 7", "3 classes", "0 to 2"});
  const std::vector<Tensor> after = model.get_weights();
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].to_vector<float>(), after[i].to_vector<float>()) << "a step was taken";
  }
}

TEST(LabelCheckTest, NegativeLabelsAndValidationDataToo) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD()});
  const auto data = testing::blobs(30, 2);
  testing::expect_error<ValueError>(
      [&] {
        model.fit(data.x, labels_with(30, 4, -1), {.batch_size = 8, .verbose = Verbosity::silent});
      },
      {"y[4] is -1"});
  testing::expect_error<ValueError>(
      [&] {
        model.fit(data.x, data.y,
                  {.batch_size = 8,
                   .verbose = Verbosity::silent,
                   .validation_data = std::pair{data.x, labels_with(30, 11, 3)}});
      },
      {"validation_data y[11] is 3"});
}

TEST(LabelCheckTest, EvaluateNamesTheSampleIndexInY) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD()});
  const auto data = testing::blobs(20, 2);
  testing::expect_error<ValueError>(
      [&] {
        (void)model.evaluate(data.x, labels_with(20, 19, 3),
                             {.batch_size = 6, .verbose = Verbosity::silent});
      },
      {"evaluate()", "y[19] is 3"});
}

}  // namespace
}  // namespace mixprec
