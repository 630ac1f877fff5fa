// Model::save / load_model (include/mixprec/models/saving.h): a loaded model predicts
// bit-identically and continues training; bad directories get a clear error; saving over an
// existing model replaces it as a whole.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

class ModelSavingTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelSavingTest, LoadedModelPredictsBitIdenticallyAndContinuesTraining) {
  testing::PolicyGuard guard(GetParam());
  const testing::TinyData data = testing::blobs(96, 11);
  Model m = testing::tiny_model(3, /*dropout=*/true);
  m.compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}), .metrics = {"accuracy"}});
  m.fit(data.x, data.y, {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent, .seed = 1});
  testing::TempDir dir;
  m.save(dir.path() / "model");
  EXPECT_TRUE(fs::exists(dir.path() / "model" / "config.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "model" / "model.safetensors"));

  Model again = load_model(dir.path() / "model");
  EXPECT_EQ(again.to_json(), m.to_json());
  EXPECT_TRUE(bit_identical(again.predict(data.x), m.predict(data.x)));
  ASSERT_TRUE(again.optimizer().defined());
  EXPECT_EQ(compile_config_to_json(again), compile_config_to_json(m));
  EXPECT_EQ(mixed_precision::as_loss_scale_optimizer(again.optimizer()).has_value(),
            std::string(GetParam()) == "mixed_float16");

  // Training continues: the loss stays finite and goes down from where the saved model was.
  const double before = again.evaluate(data.x, data.y, {.verbose = Verbosity::silent})[0];
  const History h = again.fit(
      data.x, data.y, {.batch_size = 16, .epochs = 3, .verbose = Verbosity::silent, .seed = 2});
  ASSERT_EQ(h.epochs.size(), 3u);
  const double after = again.evaluate(data.x, data.y, {.verbose = Verbosity::silent})[0];
  EXPECT_TRUE(std::isfinite(after));
  EXPECT_LT(after, before);
}

INSTANTIATE_TEST_SUITE_P(Policies, ModelSavingTest,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ModelSavingTest, TheConfigFileFormat) {
  Model m = testing::tiny_model(1);
  testing::TempDir dir;
  m.save(dir.path() / "m/");  // a trailing slash names the same directory
  const auto config = nlohmann::json::parse(read_text(dir.path() / "m" / "config.json"));
  EXPECT_EQ(config["format"], "mixprec-saved-model");
  EXPECT_EQ(config["version"], 1);
  EXPECT_EQ(config["model"]["class_name"], "Functional");
  EXPECT_TRUE(config["compile"].is_null());  // not compiled
  Model again = load_model(dir.path() / "m");
  EXPECT_FALSE(again.optimizer().defined());
}

TEST(ModelSavingTest, ACustomLossIsNotSavedAndTheModelLoadsUncompiled) {
  Model m = testing::tiny_model(1);
  m.compile({.loss = losses::Loss("mine", [](const Tensor& y, const Tensor& p) {
               return losses::get("sparse_categorical_crossentropy")(y, p);
             })});
  testing::TempDir dir;
  m.save(dir.path() / "m");
  Model again = load_model(dir.path() / "m");
  EXPECT_FALSE(again.optimizer().defined());
}

TEST(ModelSavingTest, BadDirectoriesGetClearErrors) {
  testing::TempDir dir;
  const fs::path path = dir.path() / "m";
  Model m = testing::tiny_model(1);
  m.save(path);
  const std::string good_config = read_text(path / "config.json");

  testing::expect_error<IOError>([&] { (void)load_model(dir.path() / "absent"); },
                                 {"absent", "no such file or directory"});
  fs::create_directory(dir.path() / "empty");
  testing::expect_error<IOError>([&] { (void)load_model(dir.path() / "empty"); },
                                 {"empty", "config.json", "cannot read"});
  write_text(path / "config.json", "{\"format\": \"mixprec-saved-model\", ");
  testing::expect_error<IOError>([&] { (void)load_model(path); },
                                 {"config.json", "not valid JSON"});
  write_text(path / "config.json", R"({"format": "keras", "version": 1, "model": {}})");
  testing::expect_error<IOError>([&] { (void)load_model(path); }, {"not a saved mixprec model"});
  auto bad = nlohmann::json::parse(good_config);
  bad["version"] = 7;
  write_text(path / "config.json", bad.dump());
  testing::expect_error<IOError>([&] { (void)load_model(path); },
                                 {"unsupported saved-model version"});
  bad = nlohmann::json::parse(good_config);
  bad["model"]["config"]["layers"][1]["config"]["units"] = -4;
  write_text(path / "config.json", bad.dump());
  testing::expect_error<ValueError>(
      [&] { (void)load_model(path); },
      {"config.json", R"(layers[1] (hidden): "units" must be a positive integer, got -4)"});
  bad = nlohmann::json::parse(good_config);
  bad["compile"] = nlohmann::json::parse(R"({"optimizer": 3, "loss": "x", "metrics": []})");
  write_text(path / "config.json", bad.dump());
  testing::expect_error<ValueError>([&] { (void)load_model(path); },
                                    {"config.json", "compile config"});

  // A config that claims a model far larger than its weights file is refused before building.
  bad = nlohmann::json::parse(good_config);
  bad["model"]["config"]["layers"][1]["config"]["units"] = 1 << 20;
  write_text(path / "config.json", bad.dump());
  testing::expect_error<ValueError>([&] { (void)load_model(path); },
                                    {"config.json", "layers[1] (hidden)", "parameters"});

  write_text(path / "config.json", good_config);
  fs::remove(path / "model.safetensors");
  testing::expect_error<IOError>([&] { (void)load_model(path); }, {"model.safetensors"});
}

TEST(ModelSavingTest, WeightsOfAnotherModelAreRefused) {
  testing::TempDir dir;
  Model a = testing::tiny_model(1);
  a.save(dir.path() / "a");
  clear_session();
  auto in = Input({2});
  auto out = layers::Dense(5, {.name = "hidden"})(in);  // same name, another shape
  Model b(in, out);
  b.save(dir.path() / "b");
  fs::copy_file(dir.path() / "b" / "model.safetensors", dir.path() / "a" / "model.safetensors",
                fs::copy_options::overwrite_existing);
  testing::expect_error<ValueError>([&] { (void)load_model(dir.path() / "a"); }, {"hidden/kernel"});
}

TEST(ModelSavingTest, SavingOverAModelReplacesItAsAWhole) {
  testing::TempDir dir;
  const fs::path path = dir.path() / "m";
  const testing::TinyData data = testing::blobs(12, 3);
  Model first = testing::tiny_model(1);
  first.save(path);
  Model second = testing::tiny_model(2);
  second.save(path);
  Model loaded = load_model(path);
  EXPECT_TRUE(bit_identical(loaded.predict(data.x), second.predict(data.x)));
  // Nothing is left beside it: no staging or old directory.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "m");
  }
  EXPECT_EQ(entries, 1);

  // A save that fails (a model the config cannot describe) leaves the saved model as it was.
  auto in = Input({2});
  initializers::Initializer mine(
      "mine", [](const Shape& s, DType d, Generator&) { return zeros(s, {.dtype = d}); });
  Model custom(in, layers::Dense(3, {.kernel_initializer = mine})(in));
  EXPECT_THROW(custom.save(path), ValueError);
  Model still = load_model(path);
  EXPECT_TRUE(bit_identical(still.predict(data.x), second.predict(data.x)));
  entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) (void)e, ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(ModelSavingTest, EveryZooModelSavesAndLoads) {
  set_seed(4);
  testing::TempDir dir;
  Model m = applications::cnn({.input_size = 8, .channels = 1, .classes = 3});
  m.compile({.optimizer = optimizers::SGD({.learning_rate = 0.01, .momentum = 0.9})});
  m.save(dir.path() / "cnn");
  Model again = load_model(dir.path() / "cnn");
  const Tensor x = random_normal({2, 8, 8, 1});
  EXPECT_TRUE(bit_identical(again.predict(x), m.predict(x)));
}

}  // namespace
}  // namespace mixprec
