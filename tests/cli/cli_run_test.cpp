// Successful runs of the mixprec command line on a tiny Fashion-MNIST-format data set that the
// test writes: info, train (fit and custom loops) with --metrics-json, compare's table, bench's
// DESIGN §5 row. Expected values are computed here from the options, not read from the program.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/physical_devices.h"

namespace mixprec::cli_test {
namespace {

using nlohmann::json;

constexpr std::uint32_t kTrain = 300, kTest = 100;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// Parameters of the 784-U-U-10 model with biases, counted independently of the library.
std::int64_t mlp_params(std::int64_t units) {
  return 784 * units + units + units * units + units + units * 10 + 10;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

class CliRun : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_fashion_mnist(data_.path(), kTrain, kTest); }
  std::string dataset() const { return "fashion_mnist:" + data_.path().string(); }
  TempDir data_;
};

// The checks every train run's JSON must pass. 300 samples, validation split 0.2: 240 train
// samples in batches of 30 (8 steps per epoch), 60 validation samples.
void check_train_json(const json& m, const std::string& policy, const std::string& loop, int epochs,
                      std::int64_t units, bool expect_loss_scale) {
  EXPECT_EQ(m.at("model"), "mlp");
  EXPECT_EQ(m.at("dataset"), "fashion_mnist");
  EXPECT_EQ(m.at("policy"), policy);
  EXPECT_EQ(m.at("loop"), loop);
  EXPECT_EQ(m.at("device"), "cpu");
  EXPECT_EQ(m.at("batch_size"), 30);
  EXPECT_EQ(m.at("units"), units);
  EXPECT_EQ(m.at("params"), mlp_params(units));
  EXPECT_EQ(m.at("train_samples"), 240);
  EXPECT_EQ(m.at("validation_samples"), 60);
  EXPECT_EQ(m.at("test_samples"), kTest);

  const json& e = m.at("epochs");
  ASSERT_EQ(e.size(), static_cast<std::size_t>(epochs));
  for (int i = 0; i < epochs; ++i) {
    SCOPED_TRACE("epoch " + std::to_string(i + 1));
    EXPECT_EQ(e[i].at("epoch"), i + 1);
    const double loss = e[i].at("loss"), accuracy = e[i].at("accuracy");
    EXPECT_TRUE(std::isfinite(loss) && loss > 0.0) << loss;
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    EXPECT_TRUE(e[i].at("val_loss").is_number());
    EXPECT_GE(e[i].at("val_accuracy").get<double>(), 0.0);
    EXPECT_GT(e[i].at("seconds").get<double>(), 0.0);
    EXPECT_EQ(e[i].at("steps"), 8);
    EXPECT_EQ(e[i].at("loss_scale").is_number(), expect_loss_scale);
    EXPECT_GE(e[i].at("skipped_steps").get<int>(), 0);
  }
  // The classes are separable (a bright band of rows per class): training must make progress.
  EXPECT_LT(e[epochs - 1].at("loss").get<double>(), e[0].at("loss").get<double>());
  EXPECT_GE(m.at("test").at("accuracy").get<double>(), 0.5);  // chance is 0.1
  EXPECT_TRUE(std::isfinite(m.at("test").at("loss").get<double>()));

  EXPECT_GT(m.at("samples_per_second").get<double>(), 0.0);
  const json& steps = m.at("step_time_ms");
  EXPECT_EQ(steps.at("steps"), 8 * epochs);
  EXPECT_GT(steps.at("min").get<double>(), 0.0);
  EXPECT_LE(steps.at("min").get<double>(), steps.at("median").get<double>());
  EXPECT_LE(steps.at("median").get<double>(), steps.at("max").get<double>());
  // The float32 master weights alone are params * 4 bytes on top of the loaded data.
  EXPECT_GE(m.at("peak_memory_bytes").get<std::int64_t>(),
            m.at("data_memory_bytes").get<std::int64_t>() + 4 * mlp_params(units));
  // The loaded data: 300 + 100 images of 784 float32 and as many int64 labels.
  EXPECT_GE(m.at("data_memory_bytes").get<std::int64_t>(), (kTrain + kTest) * (784 * 4 + 8));
  const json& scale = m.at("loss_scale");
  EXPECT_EQ(scale.at("final").is_number(), expect_loss_scale);
  if (expect_loss_scale) EXPECT_GE(scale.at("final").get<double>(), 1.0);
  EXPECT_GE(scale.at("skipped_steps").get<int>(), 0);
}

TEST(CliInfo, MentionsTheCpuAndARecommendedPolicy) {
  TempDir dir;
  const auto r = run_cli({"info", "--json", dir.file("info.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recommended policy: "), std::string::npos) << r.out;
  const json info = read_json(dir.file("info.json"));
  ASSERT_FALSE(info.at("devices").empty());
  EXPECT_EQ(info.at("devices")[0].at("kind"), "CPU");
  const std::string policy = info.at("recommended_policy");
  EXPECT_TRUE(policy == "float32" || policy == "mixed_float16" || policy == "mixed_bfloat16")
      << policy;
  EXPECT_NE(r.out.find("recommended policy: " + policy), std::string::npos);
}

// Each mixed policy's line names it once: "mixed_float16: <warning>", not the warning's own
// prefix after the CLI's.
TEST(CliInfo, PolicyLinesNameThePolicyOnce) {
  const auto r = run_cli({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string name : {"mixed_float16", "mixed_bfloat16"}) {
    const std::size_t at = r.out.find("\n" + name + ": ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_EQ(line.find(name, 1), std::string::npos) << "named twice: " << line;
    EXPECT_EQ(line.find("compatibility check"), std::string::npos) << line;
  }
}

TEST(CliHelp, TrainHelpListsTheOptionsAndExitsZero) {
  const auto r = run_cli({"train", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--policy", "--batch-size", "--loop", "--metrics-json"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
}

TEST_F(CliRun, TrainFitWritesSaneMetricsJson) {
  const std::string path = data_.file("metrics.json");
  const auto r = run_cli({"train", "--dataset", dataset(), "--units", "32", "--epochs", "3",
                          "--batch-size", "30", "--learning-rate", "0.003", "--policy",
                          "mixed_float16", "--verbose", "0", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Test loss: "), std::string::npos) << r.out;
  check_train_json(read_json(path), "mixed_float16", "fit", 3, 32, /*expect_loss_scale=*/true);
}

// --steps-per-execution runs fit() with CompileOptions::steps_per_execution: the same training,
// bit for bit (the JSON's losses and accuracies equal), and the value in the JSON.
TEST_F(CliRun, TrainStepsPerExecutionTrainsAsOneStepPerExecution) {
  std::vector<json> runs;
  for (const char* n : {"1", "3"}) {
    const std::string path = data_.file(std::string("metrics-") + n + ".json");
    const auto r = run_cli({"train", "--dataset", dataset(), "--units", "16", "--epochs", "2",
                            "--batch-size", "30", "--policy", "mixed_float16", "--verbose", "0",
                            "--steps-per-execution", n, "--metrics-json", path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    runs.push_back(read_json(path));
    check_train_json(runs.back(), "mixed_float16", "fit", 2, 16, /*expect_loss_scale=*/true);
    EXPECT_EQ(runs.back().at("steps_per_execution"), std::stoi(n));
  }
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy", "loss_scale"}) {
    for (std::size_t e = 0; e < 2; ++e) {
      EXPECT_EQ(runs[0].at("epochs")[e].at(key), runs[1].at("epochs")[e].at(key)) << key;
    }
  }
  EXPECT_EQ(runs[0].at("test"), runs[1].at("test"));
}

// --lr-schedule cosine gives the optimizer Keras's CosineDecay over the whole run: 240 training
// samples in batches of 30 for 2 epochs are 16 steps, 3 of them warm-up from 0 to the rate.
// The saved compile settings show the schedule; the metrics JSON names it with the peak rate.
TEST_F(CliRun, TrainCosineScheduleSpansTheRun) {
  const std::string path = data_.file("metrics.json");
  const std::string saved = data_.file("saved");
  const auto r =
      run_cli({"train", "--dataset",     dataset(), "--units",        "16",   "--epochs",
               "2",     "--batch-size",  "30",      "--optimizer",    "adam", "--learning-rate",
               "0.003", "--lr-schedule", "cosine",  "--warmup-steps", "3",    "--verbose",
               "0",     "--save",        saved,     "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = read_json(path);
  check_train_json(m, "float32", "fit", 2, 16, /*expect_loss_scale=*/false);
  EXPECT_EQ(m.at("lr_schedule"), "cosine");
  EXPECT_EQ(m.at("warmup_steps"), 3);
  EXPECT_DOUBLE_EQ(m.at("learning_rate").get<double>(), 0.003);
  const json rate = read_json(saved + "/config.json")
                        .at("compile")
                        .at("optimizer")
                        .at("config")
                        .at("learning_rate");
  EXPECT_EQ(rate.at("class_name"), "CosineDecay");
  const json& c = rate.at("config");
  EXPECT_EQ(c.at("decay_steps"), 16 - 3);
  EXPECT_EQ(c.at("warmup_steps"), 3);
  EXPECT_DOUBLE_EQ(c.at("warmup_target").get<double>(), 0.003);
  EXPECT_DOUBLE_EQ(c.at("initial_learning_rate").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(c.at("alpha").get<double>(), 0.0);
}

TEST_F(CliRun, TrainCustomLoopWithLossScaling) {
  const std::string path = data_.file("metrics.json");
  const auto r = run_cli({"train", "--dataset", dataset(), "--units", "32", "--epochs", "3",
                          "--batch-size", "30", "--learning-rate", "0.003", "--policy",
                          "mixed_float16", "--loop", "custom", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One progress line per epoch, then the test line.
  EXPECT_NE(r.out.find("Epoch 3/3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Test loss: "), std::string::npos) << r.out;
  check_train_json(read_json(path), "mixed_float16", "custom", 3, 32, /*expect_loss_scale=*/true);
}

TEST_F(CliRun, TrainCustomLoopFloat32HasNoLossScale) {
  const std::string path = data_.file("metrics.json");
  const auto r = run_cli({"train", "--dataset", dataset(), "--units", "16", "--epochs", "2",
                          "--batch-size", "30", "--learning-rate", "0.003", "--loop", "custom",
                          "--verbose", "0", "--metrics-json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  check_train_json(read_json(path), "float32", "custom", 2, 16, /*expect_loss_scale=*/false);
}

TEST_F(CliRun, CompareTablesOneRowPerPolicy) {
  const std::string path = data_.file("compare.json");
  const auto r = run_cli({"compare", "--dataset", dataset(), "--units", "16", "--epochs", "1",
                          "--batch-size", "50", "--verbose", "0", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  std::size_t header = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("policy ", 0) == 0) header = i;
  }
  ASSERT_LT(header + 3, lines.size()) << r.out;
  for (const char* column :
       {"s/epoch", "samples/s", "step ms", "peak mem", "loss scale", "skipped", "test acc"}) {
    EXPECT_NE(lines[header].find(column), std::string::npos) << column;
  }
  const std::vector<std::string> policies = {"float32", "mixed_float16", "mixed_bfloat16"};
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const std::string& row = lines[header + 1 + i];
    EXPECT_EQ(row.rfind(policies[i] + " ", 0), 0u) << row;
    std::istringstream fields(row);
    std::string name, scale;
    double s_per_epoch = 0, samples = 0, step = 0, mib = 0, acc = 0;
    std::string unit;
    long long skipped = -1;
    fields >> name >> s_per_epoch >> samples >> step >> mib >> unit >> scale >> skipped >> acc;
    ASSERT_FALSE(fields.fail()) << row;
    EXPECT_GT(s_per_epoch, 0.0);
    EXPECT_GT(samples, 0.0);
    EXPECT_GT(step, 0.0);
    EXPECT_EQ(unit, "MiB");
    EXPECT_EQ(scale == "-", policies[i] != "mixed_float16") << row;  // only float16 scales
    EXPECT_GE(skipped, 0);
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
  }
  const json c = read_json(path);
  ASSERT_EQ(c.at("runs").size(), policies.size());
  for (std::size_t i = 0; i < policies.size(); ++i) {
    EXPECT_EQ(c["runs"][i].at("policy"), policies[i]);
    EXPECT_EQ(c["runs"][i].at("batch_size"), 50);
    EXPECT_EQ(c["runs"][i].at("epochs").size(), 1u);
  }
}

// `mixprec compare --device cuda` prints the seed-style table with every policy trained on the GPU
// (SKIPPED without one; the GPU tests proper are in tests/gpu).
TEST_F(CliRun, CompareOnCudaPrintsTheSeedTable) {
  if (!MIXPREC_HAVE_CUDA || list_physical_devices("GPU").empty()) {
    GTEST_SKIP() << "no usable CUDA GPU";
  }
  const std::string path = data_.file("compare_cuda.json");
  const auto r = run_cli({"compare", "--device", "cuda", "--dataset", dataset(), "--units", "16",
                          "--epochs", "1", "--batch-size", "50", "--verbose", "0", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("device cuda:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("steps timed on the GPU"), std::string::npos) << r.out;
  const auto lines = lines_of(r.out);
  std::size_t header = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("policy ", 0) == 0) header = i;
  }
  ASSERT_LT(header + 3, lines.size()) << r.out;
  const std::vector<std::string> policies = {"float32", "mixed_float16", "mixed_bfloat16"};
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const std::string& row = lines[header + 1 + i];
    EXPECT_EQ(row.rfind(policies[i] + " ", 0), 0u) << row;
    std::istringstream fields(row);
    std::string name, unit, scale;
    double s_per_epoch = 0, samples = 0, step = 0, mib = 0, acc = -1;
    long long skipped = -1;
    fields >> name >> s_per_epoch >> samples >> step >> mib >> unit >> scale >> skipped >> acc;
    ASSERT_FALSE(fields.fail()) << row;
    EXPECT_GT(samples, 0.0) << row;
    EXPECT_GT(step, 0.0) << row;
    EXPECT_GT(mib, 0.0) << row;  // the GPU's peak: the model, slots and batches live there
    EXPECT_EQ(scale == "-", policies[i] != "mixed_float16") << row;
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
  }
  const json c = read_json(path);
  EXPECT_EQ(c.at("device"), "cuda:0");
  ASSERT_EQ(c.at("runs").size(), policies.size());
}

TEST(CliBench, WritesADesignSection5Row) {
  TempDir dir;
  const std::string path = dir.file("bench.json");
  const auto r = run_cli({"bench", "--policy", "mixed_bfloat16", "--units", "16", "--batch-size",
                          "8", "--steps", "3", "--warmup", "1", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json b = read_json(path);
  for (const char* key : {"device", "commit", "date", "command", "workload", "results"}) {
    EXPECT_TRUE(b.contains(key)) << key;
  }
  EXPECT_EQ(b.at("workload").at("model"), "mlp");
  EXPECT_EQ(b.at("workload").at("batch_size"), 8);
  EXPECT_EQ(b.at("workload").at("steps"), 3);
  ASSERT_EQ(b.at("results").size(), 1u);
  const json& row = b["results"][0];
  EXPECT_EQ(row.at("system"), "mixprec");
  EXPECT_EQ(row.at("policy"), "mixed_bfloat16");
  EXPECT_EQ(row.at("batch_size"), 8);
  const double lo = row["step_ms"]["min"], median = row["step_ms"]["median"],
               hi = row["step_ms"]["max"];
  EXPECT_GT(lo, 0.0);
  EXPECT_LE(lo, median);
  EXPECT_LE(median, hi);
  // samples/s and TFLOP/s from the median step time: 6 * batch * kernel elements FLOPs per step.
  const double kernels = 784.0 * 16 + 16.0 * 16 + 16.0 * 10;
  EXPECT_NEAR(row.at("samples_per_s").get<double>(), 8.0 / (median / 1e3),
              1e-9 * 8.0 / (median / 1e3));
  const double tflops = 6.0 * 8 * kernels / (median / 1e3) / 1e12;
  EXPECT_NEAR(row.at("tflops").get<double>(), tflops, 1e-9 * tflops);
  // At least the float32 weights and the synthetic batch.
  EXPECT_GE(row.at("peak_memory_bytes").get<std::int64_t>(), 4 * (mlp_params(16) + 8 * 784));
}

}  // namespace
}  // namespace mixprec::cli_test
