// mixprec evaluate / predict on saved models that are not there or not whole (issue 11, item 6;
// DESIGN §2.7): a missing directory, an empty one, a corrupt config, truncated weights, the model
// of another data set. Each is exit 1 (exit 2 for a usage error) with one "error: ..." line that
// names what is wrong, and predict writes no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/mixprec.h"

namespace mixprec::cli_test {
namespace {

namespace fs = std::filesystem;

class CliSavedModel : public ::testing::Test {
 protected:
  // One small saved model for the whole suite (training it is the slow part).
  static void SetUpTestSuite() {
    data_ = new TempDir;
    saved_ = new TempDir;
    write_tiny_fashion_mnist(data_->path(), 120, 40);
    const CliResult r = run_cli({"train", "--model", "mlp", "--units", "8", "--hidden-layers", "1",
                                 "--dataset", dataset(), "--epochs", "1", "--batch-size", "40",
                                 "--verbose", "0", "--save", (saved_->path() / "model").string(),
                                 "--checkpoint-dir", (saved_->path() / "ckpt").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete data_;
    delete saved_;
  }
  static std::string dataset() { return "fashion_mnist:" + data_->path().string(); }
  static fs::path good() { return saved_->path() / "model"; }
  static fs::path checkpoints() { return saved_->path() / "ckpt"; }
  // The newest checkpoint train --checkpoint-dir wrote (after one epoch of 3 batches: ckpt-N).
  static fs::path newest_checkpoint() {
    fs::path newest;
    for (const auto& e : fs::directory_iterator(checkpoints())) {
      const std::string name = e.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && e.path().extension() == ".safetensors" &&
          (newest.empty() || name > newest.filename().string())) {
        newest = e.path();
      }
    }
    return newest;
  }

  // A copy of the good model in the test's own directory, to break.
  fs::path copy_of_good() {
    const fs::path dir = work_.path() / "model";
    fs::copy(good(), dir, fs::copy_options::recursive);
    return dir;
  }

  // evaluate and predict on `model_dir` both fail with exit `code` and one error line holding
  // every piece of `expected`; predict leaves no output file.
  void expect_refused(const fs::path& model_dir, const std::vector<std::string>& expected,
                      int code = 1, const std::string& data = "") {
    const std::string ds = data.empty() ? dataset() : data;
    const fs::path output = work_.path() / "out.npy";
    const std::vector<CliResult> runs = {
        run_cli({"evaluate", "--model", model_dir.string(), "--dataset", ds}),
        run_cli({"predict", "--model", model_dir.string(), "--dataset", ds, "--output",
                 output.string()})};
    for (const CliResult& r : runs) {
      EXPECT_EQ(r.exit_code, code) << r.out << r.err;
      ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
      for (const std::string& piece : expected) {
        EXPECT_NE(r.err.find(piece), std::string::npos) << "want '" << piece << "' in " << r.err;
      }
    }
    EXPECT_FALSE(fs::exists(output)) << "predict wrote a file for a model that did not load";
  }

  static TempDir* data_;
  static TempDir* saved_;
  TempDir work_;
};

TempDir* CliSavedModel::data_ = nullptr;
TempDir* CliSavedModel::saved_ = nullptr;

TEST_F(CliSavedModel, TheGoodModelLoads) {
  const CliResult r = run_cli({"evaluate", "--model", good().string(), "--dataset", dataset()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("loss: "), std::string::npos) << r.out;
}

TEST_F(CliSavedModel, MissingDirectory) {
  const fs::path missing = work_.path() / "no-such-model";
  expect_refused(missing,
                 {missing.string(), "no such file or directory", "--save", "--checkpoint-dir"});
}

// A training checkpoint file evaluates and predicts as the saved model of the same run does.
TEST_F(CliSavedModel, ACheckpointFileLoadsAsTheSavedModel) {
  const fs::path ckpt = newest_checkpoint();
  ASSERT_FALSE(ckpt.empty());
  const CliResult from_ckpt =
      run_cli({"evaluate", "--model", ckpt.string(), "--dataset", dataset()});
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.err;
  const CliResult from_dir =
      run_cli({"evaluate", "--model", good().string(), "--dataset", dataset()});
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  EXPECT_NE(from_ckpt.out.find("loss: "), std::string::npos) << from_ckpt.out;
  EXPECT_EQ(from_ckpt.out.substr(from_ckpt.out.find("loss: ")),
            from_dir.out.substr(from_dir.out.find("loss: ")));
  const fs::path output = work_.path() / "p.csv";
  const CliResult p = run_cli(
      {"predict", "--model", ckpt.string(), "--dataset", dataset(), "--output", output.string()});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(fs::exists(output));
}

// The checkpoint directory is not a model: the error names its newest file to pass instead.
TEST_F(CliSavedModel, ACheckpointDirectoryNamesItsNewestFile) {
  expect_refused(checkpoints(), {"checkpoint directory", newest_checkpoint().string()});
}

// A weights file (save_weights) has no architecture: the error says what it is.
TEST_F(CliSavedModel, AWeightsFileSaysWhatItIs) {
  const fs::path dir = copy_of_good();
  expect_refused(dir / "model.safetensors", {"weights file", "load_weights"});
}

TEST_F(CliSavedModel, EmptyDirectory) {
  const fs::path empty = work_.path() / "empty";
  fs::create_directory(empty);
  expect_refused(empty, {"config.json"});
}

TEST_F(CliSavedModel, CorruptConfig) {
  const fs::path dir = copy_of_good();
  std::ofstream(dir / "config.json", std::ios::trunc) << "{\"format\": \"mixprec-saved-model\", ";
  expect_refused(dir, {"config.json"});
}

TEST_F(CliSavedModel, ConfigOfAnotherFormat) {
  const fs::path dir = copy_of_good();
  std::ofstream(dir / "config.json", std::ios::trunc) << "{\"format\": \"keras\", \"version\": 1}";
  expect_refused(dir, {"config.json"});
}

TEST_F(CliSavedModel, TruncatedWeights) {
  const fs::path dir = copy_of_good();
  const fs::path weights = dir / "model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) - 7);
  expect_refused(dir, {"model.safetensors"});
}

TEST_F(CliSavedModel, MissingWeights) {
  const fs::path dir = copy_of_good();
  fs::remove(dir / "model.safetensors");
  expect_refused(dir, {"model.safetensors"});
}

TEST_F(CliSavedModel, DataOfAnotherShape) {
  // The model takes 784 features; 4x4 synthetic images have 16.
  expect_refused(good(), {"takes inputs of shape (None, 784)", "16 values"}, 1,
                 "synthetic:4x4x1:3:50");
}

// Issue 33: a flipped byte in a weight is refused by the checksum, the weights file named.
TEST_F(CliSavedModel, FlippedByteInTheWeights) {
  const fs::path dir = copy_of_good();
  const fs::path weights = dir / "model.safetensors";
  std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-3, std::ios::end);  // a byte of the last tensor
  char c = 0;
  f.get(c);
  f.seekp(-3, std::ios::end);
  f.put(static_cast<char>(c ^ 0x10));
  f.close();
  expect_refused(dir, {weights.string() + ": tensor '", "does not match its checksum"});
}

// Issue 33: NaN weights load only with --allow-nonfinite.
TEST_F(CliSavedModel, NonFiniteWeightsNeedAllowNonfinite) {
  const fs::path dir = work_.path() / "nan";
  {
    Model model = load_model(good());
    std::vector<Tensor> weights = model.get_weights();
    std::vector<float> values = weights.back().to_vector<float>();
    values[0] = std::numeric_limits<float>::quiet_NaN();
    weights.back() = from_vector(values, weights.back().shape());
    model.set_weights(weights);
    model.save(dir);
  }
  expect_refused(dir,
                 {(dir / "model.safetensors").string(), "1 non-finite value", "--allow-nonfinite"});
  const CliResult r =
      run_cli({"evaluate", "--model", dir.string(), "--dataset", dataset(), "--allow-nonfinite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nan - accuracy"), std::string::npos) << r.out;  // "nan" or "-nan"
}

// Issue 33: a deep value under a key the reader ignores is one error line, not a stack overflow.
TEST_F(CliSavedModel, DeepValueUnderAnIgnoredKey) {
  const fs::path dir = copy_of_good();
  std::string config;
  {
    std::ifstream in(dir / "config.json");
    config.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::size_t at = config.find("\"config\"");
  ASSERT_NE(at, std::string::npos);
  std::ofstream(dir / "config.json", std::ios::trunc)
      << config.substr(0, at) << "\"ignored\": " << std::string(1'000'000, '[')
      << std::string(1'000'000, ']') << ", " << config.substr(at);
  expect_refused(dir, {(dir / "config.json").string(), "nests arrays and objects"});
}

TEST_F(CliSavedModel, ModelOptionIsRequired) {
  const CliResult r = run_cli({"evaluate", "--dataset", dataset()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixprec::cli_test
