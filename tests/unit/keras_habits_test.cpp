// The spellings a Keras or PyTorch user types first: verbose as 0, 1, 2 or "auto"; printing a
// DType, Shape, Policy or Tensor with operator<<; loss.item<float>().
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

template <typename T>
std::string printed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

TEST(KerasHabitsTest, VerboseTakesKerasNumbersAndAuto) {
  const FitOptions silent{.verbose = 0};
  EXPECT_EQ(silent.verbose, Verbosity::silent);
  EXPECT_EQ(FitOptions{.verbose = 1}.verbose, Verbosity::progress_bar);
  EXPECT_EQ(FitOptions{.verbose = 2}.verbose, Verbosity::one_line_per_epoch);
  EXPECT_EQ(FitOptions{.verbose = "auto"}.verbose, Verbosity::automatic);
  EXPECT_EQ(EvaluateOptions{.verbose = 0}.verbose, Verbosity::silent);
  EXPECT_EQ(PredictOptions{.verbose = 2}.verbose.level(), 2);
  EXPECT_EQ(FitOptions{}.verbose, Verbosity::automatic);
  EXPECT_EQ(static_cast<int>(Verbosity::one_line_per_epoch), 2);
  testing::expect_error<ValueError>([] { (void)Verbosity(3); }, {"verbose", "0", "\"auto\"", "3"});
  testing::expect_error<ValueError>([] { (void)Verbosity("loud"); }, {"\"loud\""});
}

TEST(KerasHabitsTest, FitWithVerboseZeroPrintsNothing) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::SGD()});
  const auto data = testing::blobs(24, 2);
  ::testing::internal::CaptureStdout();
  model.fit(data.x, data.y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

TEST(KerasHabitsTest, PrintingDTypeShapePolicyAndTensor) {
  EXPECT_EQ(printed(DType::bfloat16), "bfloat16");
  EXPECT_EQ(printed(kFloat16), "float16");
  EXPECT_EQ(printed(Shape({32, 784})), "(32, 784)");
  EXPECT_EQ(printed(mixed_precision::Policy("mixed_float16")), "<Policy \"mixed_float16\">");
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).to(kFloat16);
  EXPECT_EQ(printed(x.dtype()), "float16");
  EXPECT_EQ(printed(x.shape()), "(2, 3)");
  EXPECT_EQ(printed(x), "Tensor(shape=(2, 3), dtype=float16, values=[[1, 2, 3], [4, 5, 6]])");
}

TEST(KerasHabitsTest, ItemConvertsToTheTypeAsked) {
  const Tensor loss = full(Shape{}, 0.25);
  const float f = loss.item<float>();
  EXPECT_EQ(f, 0.25f);
  EXPECT_EQ(loss.item<double>(), 0.25);
  EXPECT_EQ(loss.item(), 0.25);
  // An integer is read exactly, not through a double (2^53 + 1 is not a double).
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  EXPECT_EQ(from_vector(std::vector<std::int64_t>{big}, {1}).item<std::int64_t>(), big);
  testing::expect_error<ValueError>([] { (void)zeros({2}).item<float>(); },
                                    {"one element", "(2,)"});
}

}  // namespace
}  // namespace mixprec
