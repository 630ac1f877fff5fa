// Issue 33: every reader bounds the nesting of outside JSON on every path, keys it ignores
// included. A value nested a million deep anywhere in a saved model's config.json, a compile
// config, a checkpoint's state or a safetensors header is a clean mixprec::Error naming the file;
// before the bound it crashed `mixprec evaluate` (dump() recursing from load_model) or passed
// unnoticed. config::show(), which error messages use to print a value, walks at most a few levels.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "models/config_reader.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using nlohmann::json;

// Deep enough that any recursion over it overflows an 8 MiB stack.
constexpr int kDeep = 1'000'000;

std::string deep_array_text() { return std::string(kDeep, '[') + std::string(kDeep, ']'); }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// `config` with `"marker": 0` added at `pointer`, then the marker replaced by the deep text.
std::string with_deep_value(const std::string& config, const std::string& pointer) {
  json j = json::parse(config);
  j[json::json_pointer(pointer)] = "DEEP-VALUE-HERE";
  std::string text = j.dump();
  const std::string marker = "\"DEEP-VALUE-HERE\"";
  text.replace(text.find(marker), marker.size(), deep_array_text());
  return text;
}

// The message of the mixprec::Error that `f` throws (a failure when it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a mixprec::Error";
  return "";
}

Model saved_model(const std::filesystem::path& dir) {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::Adam(),
                 .loss = std::string("sparse_categorical_crossentropy"),
                 .metrics = {std::string("accuracy")}});
  model.save(dir);
  return model;
}

TEST(ReaderDepthTest, ADeepValueAnywhereInASavedModelsConfigIsAnErrorNamingTheFile) {
  testing::TempDir dir;
  const auto saved = dir.path() / "m";
  saved_model(saved);
  const std::string config = read_file(saved / "config.json");
  // Under keys the readers ignore (the top level, a layer's config, the compile settings) and
  // under ones they read.
  for (const std::string pointer :
       {"/ignored", "/model/config/ignored", "/model/config/layers/1/config/ignored",
        "/compile/ignored", "/compile/loss", "/compile/optimizer/config/ignored"}) {
    SCOPED_TRACE(pointer);
    write_file(saved / "config.json", with_deep_value(config, pointer));
    const std::string message = error_of([&] { (void)load_model(saved); });
    EXPECT_NE(message.find((saved / "config.json").string()), std::string::npos) << message;
    EXPECT_NE(message.find("nests arrays and objects more than"), std::string::npos) << message;
  }
  write_file(saved / "config.json", config);
  EXPECT_NO_THROW((void)load_model(saved));
}

TEST(ReaderDepthTest, ADeepCompileConfigIsAValueError) {
  const std::string text = with_deep_value(
      R"({"optimizer": {"class_name": "SGD", "config": {}}, "loss": "mse", "metrics": []})",
      "/optimizer/config/ignored");
  EXPECT_THROW((void)compile_options_from_json(text), ValueError);
}

TEST(ReaderDepthTest, ADeepValueInACheckpointsStateIsAnIOError) {
  testing::TempDir dir;
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::Adam()});
  const auto path = dir.path() / "c.safetensors";
  io::save_checkpoint(model, path);
  io::SafetensorsContents file = io::load_safetensors(path);
  file.metadata["state"] = with_deep_value(file.metadata.at("state"), "/ignored");
  io::save_safetensors(path, file.tensors, file.metadata);
  for (const auto& read :
       {std::function<void()>([&] { (void)io::read_checkpoint_info(path); }),
        std::function<void()>([&] { (void)io::load_checkpoint(model, path); })}) {
    const std::string message = error_of(read);
    EXPECT_NE(message.find(path.string() + ": __metadata__.state nests"), std::string::npos)
        << message;
  }
}

TEST(ReaderDepthTest, ADeepValueInASafetensorsHeaderIsAnIOError) {
  const std::string header =
      R"({"__metadata__": {"format": "x"}, "ignored": )" + deep_array_text() + "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  try {
    (void)io::parse_safetensors({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()},
                                "deep.safetensors");
    FAIL() << "expected an IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.safetensors: the header nests"), std::string::npos)
        << e.what();
  }
}

TEST(ReaderDepthTest, ShowPrintsADeepValueWithoutWalkingIt) {
  json deep = 1;
  for (int i = 0; i < kDeep; ++i) {
    json outer = json::array();
    outer.push_back(std::move(deep));  // moved, not copied (a copy would recurse)
    deep = std::move(outer);
  }
  const std::string shown = models::config::show(deep);
  EXPECT_LE(shown.size(), 40u);
  EXPECT_EQ(shown.rfind("[[[[", 0), 0u) << shown;
  // Short values are shown whole, as before.
  EXPECT_EQ(models::config::show(json::parse(R"({"a":[1,2],"b":"c"})")), R"({"a":[1,2],"b":"c"})");
  EXPECT_EQ(models::config::show(json(std::string(100, 'x'))).size(), 40u);
}

}  // namespace
}  // namespace mixprec
