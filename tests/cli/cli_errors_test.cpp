// Bad input to the mixprec command line (DESIGN §2.7): every case prints exactly one line
// "error: ..." on stderr, nothing on stdout, and exits 2 for a usage error, 1 for a failed run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_support.h"

namespace mixprec::cli_test {
namespace {

// Checks the exit code and that stderr is one line starting "error: " and containing every one of
// `fragments`; stdout must be empty (the error comes before any work is printed).
void expect_error(const CliResult& r, int exit_code, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, exit_code) << "stderr: " << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << "stderr: " << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  for (const auto& fragment : fragments) {
    EXPECT_NE(lines[0].find(fragment), std::string::npos)
        << "expected '" << fragment << "' in: " << lines[0];
  }
  EXPECT_EQ(r.out, "");
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_fashion_mnist(data_.path(), 100, 20); }
  // `train` on the tiny data set with extra arguments; the run would succeed without them.
  CliResult train(std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "train",   "--dataset", "fashion_mnist:" + data_.path().string(),
        "--units", "8",         "--epochs",
        "1",       "--verbose", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }
  TempDir data_;
};

TEST_F(CliErrors, NoSubcommandIsAUsageError) { expect_error(run_cli({}), 2, {"subcommand"}); }

TEST_F(CliErrors, UnknownSubcommandIsAUsageError) { expect_error(run_cli({"fly"}), 2, {"fly"}); }

TEST_F(CliErrors, UnknownOptionIsAUsageError) {
  expect_error(train({"--bogus-option"}), 2, {"--bogus-option"});
}

TEST_F(CliErrors, MissingValueIsAUsageError) { expect_error(train({"--epochs"}), 2, {"--epochs"}); }

TEST_F(CliErrors, NonNumericValueIsAUsageError) {
  expect_error(train({"--batch-size", "many"}), 2, {"--batch-size", "many"});
}

TEST_F(CliErrors, ZeroBatchSizeIsAUsageError) {
  expect_error(train({"--batch-size", "0"}), 2, {"--batch-size must be positive, got 0"});
}

TEST_F(CliErrors, NegativeBatchSizeIsAUsageError) {
  expect_error(train({"--batch-size", "-3"}), 2, {"--batch-size must be positive, got -3"});
}

TEST_F(CliErrors, NegativeEpochsIsAUsageError) {
  expect_error(train({"--epochs=-1"}), 2, {"--epochs must be >= 0, got -1"});
}

TEST_F(CliErrors, ValidationSplitOfOneIsAUsageError) {
  expect_error(train({"--validation-split", "1"}), 2, {"--validation-split", "[0, 1)", "got 1"});
}

TEST_F(CliErrors, UnknownPolicyListsTheValidOnes) {
  expect_error(train({"--policy", "mixed_float8"}), 2,
               {"unknown policy 'mixed_float8'", "float32", "mixed_float16", "mixed_bfloat16"});
}

TEST_F(CliErrors, UnknownPolicyInCompareListsTheValidOnes) {
  expect_error(run_cli({"compare", "--policies", "float32,half"}), 2,
               {"unknown policy 'half'", "mixed_bfloat16"});
}

TEST_F(CliErrors, UnknownModelListsTheValidOnes) {
  expect_error(train({"--model", "resnet50"}), 2, {"unknown model 'resnet50'", "mlp"});
}

TEST_F(CliErrors, UnknownDatasetListsTheValidOnes) {
  expect_error(run_cli({"train", "--dataset", "cifar10"}), 2,
               {"unknown dataset 'cifar10'", "fashion_mnist"});
}

TEST_F(CliErrors, UnknownOptimizerIsAUsageError) {
  expect_error(train({"--optimizer", "lamb"}), 2, {"--optimizer", "lamb"});
}

TEST_F(CliErrors, ZeroBenchStepsIsAUsageError) {
  expect_error(run_cli({"bench", "--steps", "0"}), 2, {"--steps must be >= 1, got 0"});
}

TEST_F(CliErrors, MissingDatasetDirectorySaysHowToInstall) {
  const std::string missing = data_.file("no-such-dir");
  expect_error(run_cli({"train", "--dataset", "fashion_mnist:" + missing}), 1,
               {missing, "apt-get install dataset-fashion-mnist"});
}

TEST_F(CliErrors, CorruptIdxMagicIsRejected) {
  // IDX magic starts with two zero bytes.
  write_bytes(data_.file("t10k-labels-idx1-ubyte"), {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 20});
  expect_error(train({}), 1, {"t10k-labels-idx1-ubyte"});
}

TEST_F(CliErrors, TruncatedIdxIsRejected) {
  // The header promises 20 x 28 x 28 bytes; the file holds 10 images.
  write_idx_ubyte(data_.file("t10k-images-idx3-ubyte"), {20, 28, 28},
                  std::vector<std::uint8_t>(10 * 28 * 28, 1), Compression::none);
  expect_error(train({}), 1, {"t10k-images-idx3-ubyte"});
}

TEST_F(CliErrors, LabelOutOfRangeIsRejected) {
  std::vector<std::uint8_t> labels(20, 3);
  labels[7] = 10;
  write_idx_ubyte(data_.file("t10k-labels-idx1-ubyte"), {20}, labels, Compression::none);
  expect_error(train({}), 1, {"t10k-labels-idx1-ubyte", "10"});
}

TEST_F(CliErrors, CudaDeviceWithoutTheBackend) {
  if (MIXPREC_HAVE_CUDA) GTEST_SKIP() << "this build has a CUDA backend";
  expect_error(train({"--device", "cuda"}), 1, {"this build of mixprec has no CUDA backend"});
}

TEST_F(CliErrors, UnwritableMetricsJsonFailsAfterTheRun) {
  const auto r = train({"--metrics-json", data_.file("no-such-dir/metrics.json")});
  EXPECT_EQ(r.exit_code, 1);
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("error: cannot write " + data_.file("no-such-dir/metrics.json"), 0), 0u)
      << lines[0];
}

}  // namespace
}  // namespace mixprec::cli_test
