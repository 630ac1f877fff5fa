// Keeping and watching a run from the command line (issue 11, item 6): train with
// --checkpoint-dir, --tensorboard and --save on a tiny model and data set; the event files are
// there; the same command again finds the run complete, a longer one resumes and says where; then
// evaluate and predict on the saved model, the predictions file checked value by value against the
// model's own predict(); compare --tensorboard writes one run per policy; and the option checks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/mixprec.h"
#include "mixprec/models/saving.h"

namespace mixprec::cli_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint32_t kTrain = 300, kTest = 100;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The events.out.tfevents.* files of one TensorBoard run folder.
std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      out.push_back(entry.path());
    }
  }
  return out;
}

// Every event file of `dir` concatenated (the records' bytes; the framing and the CRCs are the
// library's tests' business, this checks what was written where).
std::string events_of(const fs::path& dir) {
  std::string all;
  for (const auto& f : event_files(dir)) all += read_all(f);
  return all;
}

// A .npy file of float32 (rows, cols) as numpy writes it (format 1.0, '<f4', C order).
std::vector<float> read_npy(const fs::path& path, std::int64_t& rows, std::int64_t& cols) {
  const std::string bytes = read_all(path);
  EXPECT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) |
      (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u) << "data not 64-byte aligned";
  const std::string header = bytes.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
  const auto shape_at = header.find("'shape': (");
  EXPECT_NE(shape_at, std::string::npos) << header;
  rows = std::stoll(header.substr(shape_at + 10));
  cols = std::stoll(header.substr(header.find(", ", shape_at + 10) + 2));
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  EXPECT_EQ(bytes.size(), 10 + header_len + values.size() * sizeof(float));
  std::memcpy(values.data(), bytes.data() + 10 + header_len,
              std::min(values.size() * sizeof(float), bytes.size() - 10 - header_len));
  return values;
}

std::vector<std::vector<float>> read_csv(const fs::path& path) {
  std::vector<std::vector<float>> rows;
  std::istringstream in(read_all(path));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<float> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) row.push_back(std::strtof(cell.c_str(), nullptr));
    rows.push_back(row);
  }
  return rows;
}

class CliKeepRun : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_fashion_mnist(data_.path(), kTrain, kTest); }
  std::string dataset() const { return "fashion_mnist:" + data_.path().string(); }
  fs::path path(const std::string& name) const { return work_.path() / name; }
  // 300 samples, validation split 0.2: 240 in batches of 30, 8 steps per epoch.
  std::vector<std::string> train_args(int epochs) const {
    return {"train",
            "--model",
            "mlp",
            "--units",
            "16",
            "--hidden-layers",
            "1",
            "--dataset",
            dataset(),
            "--epochs",
            std::to_string(epochs),
            "--batch-size",
            "30",
            "--verbose",
            "2",
            "--checkpoint-dir",
            path("ckpt").string(),
            "--save-freq",
            "5",
            "--tensorboard",
            path("tb").string(),
            "--histogram-freq",
            "1",
            "--save",
            path("saved").string(),
            "--metrics-json",
            path("metrics.json").string()};
  }
  double metrics_test_loss() const {
    std::ifstream in(path("metrics.json"));
    return json::parse(in).at("test").at("loss").get<double>();
  }
  // --metrics-json's epochs, without their timings (seconds, steps timed).
  json metrics_epochs() const {
    std::ifstream in(path("metrics.json"));
    json epochs = json::parse(in).at("epochs");
    for (json& e : epochs) {
      e.erase("seconds");
      e.erase("steps");
    }
    return epochs;
  }
  TempDir data_, work_;
};

TEST_F(CliKeepRun, TrainKeepsTheRunResumesItAndTheSavedModelEvaluatesAndPredicts) {
  // 1. A fresh run: checkpoints, event files, the saved model.
  const CliResult first = run_cli(train_args(3));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out.find("resuming"), std::string::npos) << first.out;
  EXPECT_EQ(count(first.out, "Epoch "), 3) << first.out;
  EXPECT_NE(first.out.find("saved the model to " + path("saved").string()), std::string::npos);
  EXPECT_FALSE(fs::is_empty(path("ckpt")));
  EXPECT_TRUE(fs::is_regular_file(path("saved") / "config.json"));
  EXPECT_TRUE(fs::is_regular_file(path("saved") / "model.safetensors"));

  ASSERT_EQ(event_files(path("tb") / "train").size(), 1u);
  ASSERT_EQ(event_files(path("tb") / "validation").size(), 1u);
  const std::string train_events = events_of(path("tb") / "train");
  EXPECT_NE(train_events.find("brain.Event:2"), std::string::npos);
  EXPECT_NE(train_events.find("epoch_loss"), std::string::npos);
  EXPECT_NE(train_events.find("epoch_accuracy"), std::string::npos);
  // --histogram-freq 1: every variable, every epoch.
  EXPECT_NE(train_events.find("dense_1/kernel"), std::string::npos);
  EXPECT_NE(train_events.find("dense_logits/bias"), std::string::npos);
  EXPECT_NE(events_of(path("tb") / "validation").find("epoch_loss"), std::string::npos);
  const double loss_after_3 = metrics_test_loss();
  const json epochs_1_to_3 = metrics_epochs();
  ASSERT_EQ(epochs_1_to_3.size(), 3u);

  // 2. The same command again: the run is complete, nothing is trained, same model.
  const CliResult again = run_cli(train_args(3));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("is complete (3/3 epochs, 24 optimizer steps"), std::string::npos)
      << again.out;
  EXPECT_EQ(count(again.out, "Epoch "), 0) << again.out;
  EXPECT_EQ(metrics_test_loss(), loss_after_3);
  EXPECT_EQ(metrics_epochs(), epochs_1_to_3) << "the complete run's record, from its checkpoint";

  // 3. More epochs with the same directory: it resumes after epoch 3 (Keras BackupAndRestore).
  const CliResult longer = run_cli(train_args(5));
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_NE(longer.out.find("resuming from " + (path("ckpt") / "ckpt-").string()),
            std::string::npos)
      << longer.out;
  EXPECT_NE(longer.out.find(": epoch 4/5, step 0/8 (24 optimizer steps done)"), std::string::npos)
      << longer.out;
  EXPECT_EQ(count(longer.out, "Epoch "), 2) << longer.out;
  EXPECT_NE(longer.out.find("Epoch 4/5"), std::string::npos) << longer.out;
  const double loss_after_5 = metrics_test_loss();
  // --metrics-json holds the whole run: epochs 1-3 as the first command recorded them, then 4-5.
  const json epochs_1_to_5 = metrics_epochs();
  ASSERT_EQ(epochs_1_to_5.size(), 5u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(epochs_1_to_5[i], epochs_1_to_3[i]) << i;
  EXPECT_EQ(epochs_1_to_5[4].at("epoch"), 5);

  // 4. evaluate: the loss and accuracy train printed for the saved (5-epoch) model.
  const CliResult evaluated =
      run_cli({"evaluate", "--model", path("saved").string(), "--dataset", dataset()});
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  char expected_loss[32];
  std::snprintf(expected_loss, sizeof expected_loss, "loss: %.4f", loss_after_5);
  EXPECT_NE(evaluated.out.find(expected_loss), std::string::npos) << evaluated.out;
  EXPECT_NE(evaluated.out.find(" - accuracy: "), std::string::npos) << evaluated.out;
  EXPECT_NE(evaluated.out.find("(100 test samples)"), std::string::npos) << evaluated.out;

  // 5. predict to .npy and .csv: the model's own predictions, row by row.
  const fs::path npy = path("predictions.npy"), csv = path("predictions.csv");
  const CliResult predicted_npy = run_cli({"predict", "--model", path("saved").string(),
                                           "--dataset", dataset(), "--output", npy.string()});
  ASSERT_EQ(predicted_npy.exit_code, 0) << predicted_npy.err;
  EXPECT_NE(predicted_npy.out.find("wrote 100 x 10 predictions"), std::string::npos);
  const CliResult predicted_csv = run_cli({"predict", "--model", path("saved").string(),
                                           "--dataset", dataset(), "--output", csv.string()});
  ASSERT_EQ(predicted_csv.exit_code, 0) << predicted_csv.err;

  std::int64_t rows = 0, cols = 0;
  const std::vector<float> from_npy = read_npy(npy, rows, cols);
  ASSERT_EQ(rows, kTest);
  ASSERT_EQ(cols, 10);
  const auto from_csv = read_csv(csv);
  ASSERT_EQ(from_csv.size(), static_cast<std::size_t>(kTest));

  Model model = load_model(path("saved"));
  const data::FashionMnist fm = data::load_fashion_mnist(data_.path().string());
  const std::vector<float> expected =
      model.predict(fm.x_test, {.batch_size = 256}).to(DType::float32).to_vector<float>();
  ASSERT_EQ(expected.size(), from_npy.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(from_csv[r].size(), 10u) << "row " << r;
    float sum = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      EXPECT_FLOAT_EQ(from_npy[i], expected[i]) << "row " << r << " column " << c;
      // %.9g round-trips a float32: the .csv holds the same values as the .npy.
      EXPECT_EQ(from_csv[r][c], from_npy[i]) << "row " << r << " column " << c;
      sum += from_npy[i];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-5f) << "softmax row " << r;
  }
  // Written atomically: no temporary file left beside them.
  for (const auto& entry : fs::directory_iterator(work_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }

  // 6. An unknown extension is refused before any work, and nothing is written.
  const CliResult txt = run_cli({"predict", "--model", path("saved").string(), "--dataset",
                                 dataset(), "--output", path("predictions.txt").string()});
  EXPECT_EQ(txt.exit_code, 2);
  ASSERT_EQ(txt.err_lines().size(), 1u) << txt.err;
  EXPECT_NE(txt.err.find("use .npy"), std::string::npos) << txt.err;
  EXPECT_FALSE(fs::exists(path("predictions.txt")));
}

TEST_F(CliKeepRun, CompareWritesOneTensorBoardRunPerPolicy) {
  const CliResult r = run_cli({"compare",
                               "--model",
                               "mlp",
                               "--units",
                               "16",
                               "--hidden-layers",
                               "1",
                               "--dataset",
                               dataset(),
                               "--epochs",
                               "1",
                               "--batch-size",
                               "30",
                               "--verbose",
                               "0",
                               "--policies",
                               "float32,mixed_bfloat16",
                               "--tensorboard",
                               path("tb").string(),
                               "--histogram-freq",
                               "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string policy : {"float32", "mixed_bfloat16"}) {
    ASSERT_EQ(event_files(path("tb") / policy / "train").size(), 1u) << policy;
    ASSERT_EQ(event_files(path("tb") / policy / "validation").size(), 1u) << policy;
    const std::string events = events_of(path("tb") / policy / "train");
    EXPECT_NE(events.find("epoch_loss"), std::string::npos) << policy;
    EXPECT_NE(events.find("dense_1/kernel"), std::string::npos) << policy;
  }
  EXPECT_FALSE(fs::exists(path("tb") / "train")) << "compare writes no run at the top level";
}

// Option combinations that cannot work: exit 2 and one line naming the options.
TEST_F(CliKeepRun, BadOptionCombinationsAreOneLineUsageErrors) {
  const std::vector<std::string> base = {"train",     "--model", "mlp",      "--units", "16",
                                         "--dataset", dataset(), "--epochs", "1"};
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::string tb = path("tb").string(), ck = path("ck").string();
  const std::vector<Case> cases = {
      {{"--histogram-freq", "1"}, "--histogram-freq needs --tensorboard"},
      {{"--tensorboard", tb, "--histogram-freq", "-1"}, "--histogram-freq must be >= 0"},
      {{"--save-freq", "10"}, "--save-freq needs --checkpoint-dir"},
      {{"--checkpoint-dir", ck, "--save-freq", "0"}, "--save-freq expects 'epoch' or a positive"},
      {{"--checkpoint-dir", ck, "--save-freq", "often"}, "--save-freq expects 'epoch'"},
      {{"--checkpoint-dir", ck, "--loop", "custom"}, "--checkpoint-dir needs --loop fit"},
      {{"--tensorboard", tb, "--loop", "custom"}, "--tensorboard needs --loop fit"},
      {{"--checkpoint-dir", ck, "--save", ck}, "--checkpoint-dir and --save name the same"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_NE(r.err.find("error: " + c.message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ck)) << c.message << ": created the checkpoint directory";
  }
  const CliResult twice = run_cli({"compare", "--model", "mlp", "--dataset", dataset(),
                                   "--policies", "float32,float32", "--tensorboard", tb});
  EXPECT_EQ(twice.exit_code, 2) << twice.err;
  EXPECT_NE(twice.err.find("names float32 twice"), std::string::npos) << twice.err;
}

}  // namespace
}  // namespace mixprec::cli_test
