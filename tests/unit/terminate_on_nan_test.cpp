// callbacks::TerminateOnNaN: a NaN loss stops training after that batch; finite losses do not.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

TEST(TerminateOnNaNTest, StopsAtTheFirstNaNLoss) {
  auto data = testing::blobs(64, 1);
  // Sample 20 (the second batch of 16 without shuffling) is NaN: its loss is NaN.
  std::vector<float> xs = data.x.to_vector<float>();
  xs[40] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_vector(xs, {64, 2});
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  auto cb = std::make_shared<callbacks::TerminateOnNaN>();
  ::testing::internal::CaptureStdout();
  const History h = model.fit(x, data.y,
                              {.batch_size = 16,
                               .epochs = 3,
                               .verbose = Verbosity::silent,
                               .shuffle = false,
                               .callbacks = {cb}});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(cb->terminated());
  EXPECT_NE(out.find("Batch 1: Invalid loss, terminating training"), std::string::npos) << out;
  EXPECT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(model.optimizer().iterations(), 2);
}

TEST(TerminateOnNaNTest, FiniteTrainingRunsToTheEnd) {
  const auto data = testing::blobs(32, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  auto cb = std::make_shared<callbacks::TerminateOnNaN>();
  const History h =
      model.fit(data.x, data.y,
                {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent, .callbacks = {cb}});
  EXPECT_FALSE(cb->terminated());
  EXPECT_EQ(h.epochs.size(), 2u);
}

}  // namespace
}  // namespace mixprec
