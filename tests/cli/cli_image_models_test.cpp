// The image models on the command line (cnn, efficientnet-b*, resnet50) on tiny data the tests
// write or synthesise: the preprocessing each model gets (reshape, resize, grayscale to RGB,
// flatten for the mlp), CIFAR files, synthetic data, compare with one batch size per policy, and
// bench's DESIGN §5 row. Parameter counts are computed here from the architectures.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"

namespace mixprec::cli_test {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// applications::cnn's parameters (BatchNormalization counts gamma, beta and the two moving
// statistics): four 3x3 convolutions without bias (32, 32, 64, 64 filters) each followed by
// BatchNormalization, two 2x2 max poolings, Dense(128), Dense(classes).
std::int64_t cnn_params(std::int64_t side, std::int64_t channels, std::int64_t classes) {
  const std::int64_t convs = 9 * channels * 32 + 9 * 32 * 32 + 9 * 32 * 64 + 9 * 64 * 64;
  const std::int64_t batch_norm = 4 * (32 + 32 + 64 + 64);
  const std::int64_t pooled = (side / 2) / 2;
  const std::int64_t flat = pooled * pooled * 64;
  return convs + batch_norm + flat * 128 + 128 + 128 * classes + classes;
}

std::int64_t mlp_params(std::int64_t features, std::int64_t units, std::int64_t classes) {
  return features * units + units + units * units + units + units * classes + classes;
}

TEST(CliImages, TrainCnnOnFashionMnistReshapesAndResizes) {
  TempDir dir;
  write_tiny_fashion_mnist(dir.path(), 60, 20);
  const std::string path = dir.file("metrics.json");
  const auto r = run_cli({"train", "--model", "cnn", "--dataset", "fashion_mnist:" + dir.str(),
                          "--input-size", "8", "--epochs", "1", "--batch-size", "30", "--verbose",
                          "0", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cnn 8x8x1 -> 10 on fashion_mnist"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per-batch preprocessing: reshape_images(28, 28, 1) -> resize(8, 8)"),
            std::string::npos)
      << r.out;
  const json m = read_json(path);
  EXPECT_EQ(m.at("model"), "cnn");
  EXPECT_EQ(m.at("input_size"), 8);
  EXPECT_EQ(m.at("channels"), 1);
  EXPECT_EQ(m.at("classes"), 10);
  EXPECT_FALSE(m.contains("units"));
  EXPECT_EQ(m.at("pipeline"), "reshape_images(28, 28, 1) -> resize(8, 8)");
  EXPECT_EQ(m.at("params"), cnn_params(8, 1, 10));
  EXPECT_EQ(m.at("optimizer"), "adam");  // the CNNs' default (seed 002)
  EXPECT_EQ(m.at("train_samples"), 48);
  EXPECT_EQ(m.at("validation_samples"), 12);
  EXPECT_EQ(m.at("test_samples"), 20);
  ASSERT_EQ(m.at("epochs").size(), 1u);
  EXPECT_EQ(m["epochs"][0].at("steps"), 2);  // 48 samples in batches of 30
  EXPECT_TRUE(std::isfinite(m.at("test").at("loss").get<double>()));
}

TEST(CliImages, CnnDefaultsToTheDataSizeAndMaxSamplesCutsBothSplits) {
  TempDir dir;
  write_tiny_fashion_mnist(dir.path(), 60, 30);
  const std::string path = dir.file("metrics.json");
  const auto r = run_cli({"train", "--model", "cnn", "--dataset", "fashion_mnist:" + dir.str(),
                          "--max-samples", "20", "--validation-split", "0", "--epochs", "1",
                          "--batch-size", "20", "--verbose", "0", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = read_json(path);
  EXPECT_EQ(m.at("input_size"), 28);
  EXPECT_EQ(m.at("pipeline"), "reshape_images(28, 28, 1)");
  EXPECT_EQ(m.at("params"), cnn_params(28, 1, 10));
  EXPECT_EQ(m.at("train_samples"), 20);
  EXPECT_EQ(m.at("test_samples"), 20);
  EXPECT_EQ(m["epochs"][0].at("steps"), 1);
}

TEST(CliImages, CustomLoopOnSyntheticData) {
  TempDir dir;
  const std::string path = dir.file("metrics.json");
  const auto r =
      run_cli({"train", "--model", "cnn", "--dataset", "synthetic:8x8x1:4:40", "--loop", "custom",
               "--validation-split", "0.25", "--epochs", "1", "--batch-size", "20", "--policy",
               "mixed_float16", "--verbose", "0", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = read_json(path);
  EXPECT_EQ(m.at("dataset"), "synthetic");
  EXPECT_EQ(m.at("loop"), "custom");
  EXPECT_EQ(m.at("classes"), 4);
  EXPECT_EQ(m.at("params"), cnn_params(8, 1, 4));
  EXPECT_EQ(m.at("pipeline"), "synthetic_images");
  EXPECT_EQ(m.at("train_samples"), 30);
  EXPECT_EQ(m.at("validation_samples"), 10);
  EXPECT_EQ(m.at("test_samples"), 8);  // ceil(40 / 5)
  EXPECT_EQ(m["epochs"][0].at("steps"), 2);
  EXPECT_TRUE(m["epochs"][0].at("val_loss").is_number());
  EXPECT_TRUE(m.at("loss_scale").at("final").is_number());
}

TEST(CliImages, MlpOnCifar10FlattensAndCnnOnCifar100Resizes) {
  TempDir c10, c100;
  write_tiny_cifar(c10.path(), CifarKind::cifar10, 4, 6);
  write_tiny_cifar(c100.path(), CifarKind::cifar100, 4, 6);
  const std::string p10 = c10.file("metrics.json"), p100 = c100.file("metrics.json");
  const auto r10 =
      run_cli({"train", "--dataset", "cifar10:" + c10.str(), "--units", "8", "--epochs", "1",
               "--batch-size", "8", "--verbose", "0", "--metrics-json", p10});
  ASSERT_EQ(r10.exit_code, 0) << r10.err;
  const json m10 = read_json(p10);
  EXPECT_EQ(m10.at("dataset"), "cifar10");
  EXPECT_EQ(m10.at("dataset_dir"), c10.str());
  EXPECT_EQ(m10.at("params"), mlp_params(32 * 32 * 3, 8, 10));
  EXPECT_EQ(m10.at("train_samples"), 16);  // 5 files x 4 records, 20% validate
  EXPECT_EQ(m10.at("test_samples"), 6);
  EXPECT_NE(r10.out.find("per-batch preprocessing: flatten"), std::string::npos) << r10.out;

  const auto r100 = run_cli({"train", "--model", "cnn", "--dataset", "cifar100:" + c100.str(),
                             "--input-size", "8", "--epochs", "1", "--batch-size", "10",
                             "--verbose", "0", "--metrics-json", p100});
  ASSERT_EQ(r100.exit_code, 0) << r100.err;
  const json m100 = read_json(p100);
  EXPECT_EQ(m100.at("classes"), 100);
  EXPECT_EQ(m100.at("channels"), 3);
  EXPECT_EQ(m100.at("pipeline"), "resize(8, 8)");
  EXPECT_EQ(m100.at("params"), cnn_params(8, 3, 100));
}

// Splits a table row into whitespace-separated fields.
std::vector<std::string> fields_of(const std::string& row) {
  std::istringstream in(row);
  std::vector<std::string> fields;
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

// The header line of the compare table and the rows after it.
std::vector<std::string> table(const std::string& out, std::string& header) {
  const auto lines = lines_of(out);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("policy ", 0) == 0) {
      header = lines[i];
      std::vector<std::string> rows;
      for (std::size_t j = i + 1; j < lines.size() && !lines[j].empty() && lines[j][0] != '(';
           ++j) {
        rows.push_back(lines[j]);
      }
      return rows;
    }
  }
  ADD_FAILURE() << "no table in: " << out;
  return {};
}

TEST(CliImages, CompareWithOneBatchSizePerPolicy) {
  TempDir dir;
  const std::string path = dir.file("compare.json");
  const auto r =
      run_cli({"compare", "--model", "cnn", "--dataset", "synthetic:8x8x1:4:40", "--policies",
               "float32,mixed_bfloat16", "--batch-sizes", "10,20", "--validation-split", "0",
               "--epochs", "1", "--verbose", "0", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("batch 10,20"), std::string::npos) << r.out;
  std::string header;
  const auto rows = table(r.out, header);
  EXPECT_EQ(fields_of(header)[1], "batch") << header;
  EXPECT_NE(header.find("images/s"), std::string::npos) << header;
  ASSERT_EQ(rows.size(), 2u) << r.out;
  const std::vector<std::string> policies = {"float32", "mixed_bfloat16"};
  const std::vector<int> batches = {10, 20};
  for (std::size_t i = 0; i < 2; ++i) {
    // policy batch s/epoch images/s step MiB-value MiB scale skipped acc
    const auto f = fields_of(rows[i]);
    ASSERT_EQ(f.size(), 10u) << rows[i];
    EXPECT_EQ(f[0], policies[i]);
    EXPECT_EQ(std::stoi(f[1]), batches[i]);
    EXPECT_GT(std::stod(f[3]), 0.0);  // images/s
    EXPECT_EQ(f[6], "MiB");
  }
  const json c = read_json(path);
  ASSERT_EQ(c.at("runs").size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(c["runs"][i].at("policy"), policies[i]);
    EXPECT_EQ(c["runs"][i].at("batch_size"), batches[i]);
    EXPECT_EQ(c["runs"][i]["epochs"][0].at("steps"), 40 / batches[i]);
  }
}

TEST(CliImages, SeedExperimentShapeOnFashionMnist) {
  // seed 002 as one command, shrunk: efficientnet-b0 on Fashion-MNIST resized to 32x32 RGB,
  // float32 at batch 2 and mixed_float16 at batch 4.
  TempDir dir;
  write_tiny_fashion_mnist(dir.path(), 4, 4);
  const std::string path = dir.file("compare.json");
  const auto r =
      run_cli({"compare", "--model", "efficientnet-b0", "--dataset", "fashion_mnist:" + dir.str(),
               "--input-size", "32", "--policies", "float32,mixed_float16", "--batch-sizes", "2,4",
               "--validation-split", "0", "--epochs", "1", "--verbose", "0", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per-batch preprocessing: reshape_images(28, 28, 1) -> resize(32, 32) -> "
                       "grayscale_to_rgb"),
            std::string::npos)
      << r.out;
  std::string header;
  const auto rows = table(r.out, header);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(fields_of(rows[0])[7], "-");             // float32: no loss scale
  EXPECT_NE(fields_of(rows[1])[7], "-") << rows[1];  // mixed_float16 scales the loss
  const json c = read_json(path);
  for (const auto& run : c.at("runs")) {
    EXPECT_EQ(run.at("input_size"), 32);
    EXPECT_EQ(run.at("channels"), 3);
    EXPECT_EQ(run.at("classes"), 10);
  }
  EXPECT_EQ(c["runs"][0]["epochs"][0].at("steps"), 2);
  EXPECT_EQ(c["runs"][1]["epochs"][0].at("steps"), 1);
  EXPECT_EQ(c["runs"][0].at("params"), c["runs"][1].at("params"));
}

TEST(CliImages, BenchCnnRowHasNoTflops) {
  TempDir dir;
  const std::string path = dir.file("bench.json");
  const auto r = run_cli({"bench", "--model", "cnn", "--input-size", "8", "--batch-size", "4",
                          "--steps", "2", "--warmup", "1", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json b = read_json(path);
  const json& w = b.at("workload");
  EXPECT_EQ(w.at("model"), "cnn");
  EXPECT_EQ(w.at("input_size"), 8);
  EXPECT_EQ(w.at("channels"), 1);
  EXPECT_EQ(w.at("classes"), 10);
  EXPECT_EQ(w.at("params"), cnn_params(8, 1, 10));
  EXPECT_EQ(w.at("steps"), 2);
  ASSERT_EQ(b.at("results").size(), 1u);
  const json& row = b["results"][0];
  EXPECT_EQ(row.at("system"), "mixprec");
  EXPECT_EQ(row.at("batch_size"), 4);
  EXPECT_FALSE(row.contains("tflops"));
  const double median = row["step_ms"]["median"];
  EXPECT_GT(median, 0.0);
  EXPECT_NEAR(row.at("samples_per_s").get<double>(), 4.0 / (median / 1e3),
              1e-9 * 4.0 / (median / 1e3));
  EXPECT_GT(row.at("peak_memory_bytes").get<std::int64_t>(), 4 * cnn_params(8, 1, 10));
}

TEST(CliImages, BenchResnet50OnSyntheticData) {
  TempDir dir;
  const std::string path = dir.file("bench.json");
  const auto r = run_cli({"bench", "--model", "resnet50", "--dataset", "synthetic:32x32x3:5",
                          "--batch-size", "2", "--steps", "1", "--warmup", "0", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json w = read_json(path).at("workload");
  EXPECT_EQ(w.at("input_size"), 32);
  EXPECT_EQ(w.at("channels"), 3);
  EXPECT_EQ(w.at("classes"), 5);
  // torchvision's resnet50 has 25,557,032 parameters with its 2048 -> 1000 classifier; with 5
  // classes that is 25,557,032 - 2,049,000 + 2048 * 5 + 5, plus 53,120 BatchNormalization
  // moving statistics that count_params() includes.
  EXPECT_EQ(w.at("params"), 25557032 - 2049000 + 2048 * 5 + 5 + 53120);
}

// A usage error: exit code 2 and every fragment in stderr.
void expect_usage_error(const CliResult& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
  for (const std::string& f : fragments) {
    EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
  }
}

// applications::vit's parameters with width W, one block (mlp_dim 128, the default), patch side
// p, C channels, `tokens` rows of position embedding (N patches, + 1 with a class token, which
// adds W parameters more).
std::int64_t vit_params(std::int64_t W, std::int64_t p, std::int64_t C, std::int64_t tokens,
                        bool class_token, std::int64_t classes) {
  const std::int64_t block = 4 * W + 4 * (W * W + W) + (W * 128 + 128) + (128 * W + W);
  return (p * p * C * W + W) + (class_token ? W : 0) + tokens * W + block + 2 * W +
         (W * classes + classes);
}

TEST(CliImages, VitWithAClassTokenTrainsAndBenchesAtFashionMnistSize) {
  TempDir dir;
  write_tiny_fashion_mnist(dir.path(), 40, 10);
  const std::string path = dir.file("metrics.json");
  const auto r = run_cli({"train",
                          "--model",
                          "vit",
                          "--dataset",
                          "fashion_mnist:" + dir.str(),
                          "--patch-size",
                          "7",
                          "--layers",
                          "1",
                          "--width",
                          "8",
                          "--heads",
                          "2",
                          "--pooling",
                          "token",
                          "--epochs",
                          "1",
                          "--batch-size",
                          "16",
                          "--verbose",
                          "0",
                          "--metrics-json",
                          path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = read_json(path);
  EXPECT_EQ(m.at("model"), "vit");
  EXPECT_EQ(m.at("optimizer"), "adamw");
  EXPECT_EQ(m.at("params"), vit_params(8, 7, 1, 16 + 1, true, 10));
  EXPECT_TRUE(std::isfinite(m.at("test").at("loss").get<double>()));

  const std::string bench = dir.file("bench.json");
  const auto b =
      run_cli({"bench", "--model", "vit", "--layers", "1", "--width", "8", "--heads", "2",
               "--batch-size", "2", "--steps", "1", "--warmup", "0", "--json", bench});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json w = read_json(bench).at("workload");
  EXPECT_EQ(w.at("input_size"), 28);
  EXPECT_EQ(w.at("channels"), 1);
  EXPECT_EQ(w.at("classes"), 10);
  EXPECT_EQ(w.at("params"), vit_params(8, 4, 1, 49, false, 10));

  expect_usage_error(run_cli({"train", "--model", "cnn", "--pooling", "token"}),
                     {"--pooling applies to --model vit"});
  expect_usage_error(run_cli({"train", "--model", "vit", "--seq-len", "8"}),
                     {"--seq-len and --vocab apply to the GPT models"});
  expect_usage_error(run_cli({"train", "--model", "mlp", "--layers", "2"}),
                     {"--layers, --width and --heads apply to the Transformers"});
  expect_usage_error(run_cli({"train", "--model", "vit", "--pooling", "max"}), {"--pooling"});
}

}  // namespace
}  // namespace mixprec::cli_test
