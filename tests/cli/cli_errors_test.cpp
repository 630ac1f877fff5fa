// Bad input to the mixprec command line (DESIGN §2.7): every case prints exactly one line
// "error: ..." on stderr, nothing on stdout, and exits 2 for a usage error, 1 for a failed run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/physical_devices.h"

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

TEST_F(CliErrors, StepsPerExecutionBelowOneIsAUsageError) {
  expect_error(train({"--steps-per-execution", "0"}), 2,
               {"--steps-per-execution must be >= 1, got 0"});
}

TEST_F(CliErrors, StepsPerExecutionWithTheCustomLoopIsAUsageError) {
  expect_error(train({"--steps-per-execution", "4", "--loop", "custom"}), 2,
               {"--steps-per-execution needs --loop fit"});
}

TEST_F(CliErrors, WarmupStepsWithoutTheCosineScheduleIsAUsageError) {
  expect_error(train({"--warmup-steps", "5"}), 2, {"--warmup-steps needs --lr-schedule cosine"});
}

TEST_F(CliErrors, NegativeWarmupStepsIsAUsageError) {
  expect_error(train({"--lr-schedule", "cosine", "--warmup-steps=-2"}), 2,
               {"--warmup-steps must be >= 0, got -2"});
}

// 80 training samples in one batch of the default 256, 2 epochs: 2 steps, all of them warm-up.
TEST_F(CliErrors, WarmupAsLongAsTheRunIsAUsageError) {
  expect_error(train({"--lr-schedule", "cosine", "--warmup-steps", "2", "--epochs", "2"}), 2,
               {"--warmup-steps 2 must be below the run's 2 training steps"});
}

TEST_F(CliErrors, UnknownLearningRateScheduleIsAUsageError) {
  expect_error(train({"--lr-schedule", "linear"}), 2, {"--lr-schedule", "linear"});
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
  expect_error(
      train({"--model", "vgg16"}), 2,
      {"unknown model 'vgg16'", "mlp", "cnn", "efficientnet-b0", "efficientnet-b7", "resnet50"});
  expect_error(train({"--model", "efficientnet-b8"}), 2, {"unknown model 'efficientnet-b8'"});
}

TEST_F(CliErrors, UnknownDatasetListsTheValidOnes) {
  expect_error(run_cli({"train", "--dataset", "imagenet"}), 2,
               {"unknown dataset 'imagenet'", "fashion_mnist", "cifar10:DIR", "cifar100:DIR",
                "synthetic:HxWxC:CLASSES"});
}

TEST_F(CliErrors, CifarWithoutADirectoryIsAUsageError) {
  expect_error(run_cli({"train", "--dataset", "cifar10"}), 2,
               {"cifar10 needs the directory", "cifar10:DIR"});
  expect_error(run_cli({"train", "--dataset", "cifar100:"}), 2, {"directory after ':' is empty"});
}

TEST_F(CliErrors, MalformedSyntheticSpecsAreUsageErrors) {
  expect_error(run_cli({"train", "--dataset", "synthetic:32x32x3"}), 2,
               {"synthetic:32x32x3", "synthetic:HxWxC:CLASSES[:SAMPLES]"});
  expect_error(run_cli({"train", "--dataset", "synthetic:32x0x3:10"}), 2, {"width", "got 0"});
  expect_error(run_cli({"train", "--dataset", "synthetic:32x32x3:1"}), 2, {"at least 2 classes"});
}

TEST_F(CliErrors, ModelOptionsMustFitTheModel) {
  expect_error(train({"--input-size", "32"}), 2, {"--input-size applies to the image models"});
  expect_error(train({"--model", "cnn", "--units", "16"}), 2, {"--units applies to --model mlp"});
  expect_error(run_cli({"train", "--model", "efficientnet-b0", "--input-size", "16"}), 2,
               {"--input-size for efficientnet-b0 must be >= 32, got 16"});
  expect_error(run_cli({"train", "--model", "cnn", "--input-size", "2"}), 2,
               {"must be >= 4, got 2"});
}

TEST_F(CliErrors, ImageNetworksNeedLargeEnoughImages) {
  // Without --input-size, bench uses the --dataset images' own size: 8x8 is too small here.
  expect_error(run_cli({"bench", "--model", "resnet50", "--dataset", "synthetic:8x8x3:4"}), 2,
               {"resnet50 needs images of at least 32x32", "got 8", "--input-size 32"});
}

TEST_F(CliErrors, ClassesBelowTheDataSetsIsAUsageError) {
  expect_error(run_cli({"train", "--model", "cnn", "--classes", "5"}), 2,
               {"--classes 5 is fewer than the 10 classes of fashion_mnist"});
  expect_error(train({"--classes", "1"}), 2, {"--classes must be >= 2, got 1"});
}

TEST_F(CliErrors, MaxSamplesMustBePositive) {
  expect_error(train({"--max-samples", "0"}), 2, {"--max-samples must be positive, got 0"});
}

TEST_F(CliErrors, BatchSizesMustPairWithPolicies) {
  const std::vector<std::string> base = {
      "compare", "--dataset",  "fashion_mnist:" + data_.path().string(),
      "--units", "8",          "--epochs",
      "1",       "--policies", "float32,mixed_bfloat16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  expect_error(with({"--batch-sizes", "8,16,32"}), 2,
               {"--batch-sizes has 3 values for 2 policies", "one per policy"});
  expect_error(with({"--batch-sizes", "8,0"}), 2, {"--batch-sizes", "positive", "'0'"});
  expect_error(with({"--batch-sizes", "8,x"}), 2, {"--batch-sizes", "'x'"});
  expect_error(with({"--batch-sizes", "8,,16"}), 2, {"--batch-sizes", "empty items"});
  expect_error(with({"--batch-sizes", "8,16", "--batch-size", "4"}), 2,
               {"--batch-size", "--batch-sizes", "not both"});
}

TEST_F(CliErrors, BenchRunsOnSyntheticDataOnly) {
  expect_error(run_cli({"bench", "--model", "cnn", "--dataset", "fashion_mnist"}), 2,
               {"bench times steps on synthetic data", "fashion_mnist"});
  expect_error(run_cli({"bench", "--dataset", "synthetic:8x8x1:10"}), 2,
               {"--dataset applies to the image models' bench"});
}

class CliCifarErrors : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_cifar(data_.path(), CifarKind::cifar10, 4, 4); }
  CliResult train() {
    return run_cli({"train", "--model", "mlp", "--units", "8", "--dataset",
                    "cifar10:" + data_.path().string(), "--epochs", "1", "--verbose", "0"});
  }
  TempDir data_;
};

TEST_F(CliCifarErrors, PartialRecordIsRejected) {
  // Two records and 7 bytes of a third.
  std::vector<std::uint8_t> bytes(2 * 3073 + 7, 1);
  write_bytes(data_.file("data_batch_4.bin"), bytes);
  expect_error(train(), 1,
               {data_.file("data_batch_4.bin"), "not a whole number of 3073-byte CIFAR-10 records",
                "7 bytes left over"});
}

TEST_F(CliCifarErrors, LabelOutOfRangeIsRejected) {
  std::vector<std::uint8_t> bytes(3073, 0);
  bytes[0] = 12;
  write_bytes(data_.file("test_batch.bin"), bytes);
  expect_error(train(), 1, {data_.file("test_batch.bin"), "label 12 of record 0", "[0, 9]"});
}

TEST_F(CliCifarErrors, MissingDirectorySaysWhereToGetTheData) {
  const std::string missing = data_.file("no-such-dir");
  expect_error(run_cli({"train", "--dataset", "cifar100:" + missing}), 1,
               {missing, "cifar-100-binary.tar.gz"});
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

// A CUDA build on a machine without a usable GPU (no driver, no device): --device cuda is a run
// error that says so; --device auto trains on the CPU.
TEST_F(CliErrors, CudaDeviceWithoutAGpu) {
  if (!MIXPREC_HAVE_CUDA) GTEST_SKIP() << "this build has no CUDA backend";
  if (!list_physical_devices("GPU").empty()) GTEST_SKIP() << "this machine has a GPU";
  expect_error(train({"--device", "cuda"}), 1, {"--device cuda", "no usable CUDA GPU"});
  const CliResult automatic = train({"--device", "auto"});
  EXPECT_EQ(automatic.exit_code, 0) << automatic.err;
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
