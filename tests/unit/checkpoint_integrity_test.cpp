// Issue 33: no silent corruption in checkpoints and saved weights. A flipped byte anywhere (a
// weight's exponent, an optimizer slot, the loss scale in the state) is an IOError naming the
// file and the first tensor (or the metadata) that differs; files without checksums still load;
// non-finite weights are refused unless allowed; every out-of-range value of a checkpoint's state
// is an error naming the file and the field's path, with the value printed as %g (never clamped,
// truncated or wrapped); and a bad weights file of a saved model is blamed on itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

Model trained_model() {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = mixed_precision::LossScaleOptimizer(
                     optimizers::Adam({.learning_rate = 0.01}), {.initial_scale = 32768.0})});
  const auto data = testing::blobs(48, 1);
  model.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = Verbosity::silent});
  return model;
}

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

// The header's JSON and the offset of the data in a safetensors file's bytes.
struct Layout {
  json header;
  std::size_t data = 0;
};

Layout layout_of(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return {json::parse(bytes.substr(8, n)), 8 + n};
}

// Flips bit `bit` of byte `byte` of tensor `name`'s data.
std::string flip_in_tensor(const std::string& bytes, const std::string& name, std::size_t byte,
                           int bit) {
  const Layout l = layout_of(bytes);
  const std::size_t at = l.data + l.header.at(name).at("data_offsets")[0].get<std::size_t>() + byte;
  std::string out = bytes;
  out[at] = static_cast<char>(out[at] ^ (1 << bit));
  return out;
}

TEST(CheckpointIntegrityTest, AFlippedByteIsAnErrorNamingTheFirstTensorThatDiffers) {
  testing::TempDir dir;
  Model model = trained_model();
  const fs::path path = dir.path() / "c.safetensors";
  io::save_checkpoint(model, path);
  const std::string good = read_file(path);
  const fs::path bad = dir.path() / "bad.safetensors";

  // A weight's exponent (the top byte of the first float32 of the kernel), an optimizer slot.
  for (const std::string name : {"model/hidden/kernel", "optimizer/inner/momentum/0"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(layout_of(good).header.contains(name)) << layout_of(good).header.dump();
    write_file(bad, flip_in_tensor(good, name, 3, 0));
    const std::string message = error_of([&] { (void)io::load_checkpoint(model, bad); });
    EXPECT_NE(message.find(bad.string() + ": tensor '" + name + "' does not match its checksum"),
              std::string::npos)
        << message;
  }
  // The loss scale in the state: 32768 -> 32769 (one digit, one byte).
  std::string text = good;
  const std::size_t at = text.find("32768");
  ASSERT_NE(at, std::string::npos);
  text[at + 4] = '9';
  write_file(bad, text);
  const std::string message = error_of([&] { (void)io::load_checkpoint(model, bad); });
  EXPECT_NE(message.find(bad.string() + ": __metadata__ does not match its checksum"),
            std::string::npos)
      << message;
  // Nothing changed the model; the good file still loads.
  EXPECT_NO_THROW((void)io::load_checkpoint(model, path));
}

TEST(CheckpointIntegrityTest, WeightsFilesAreCheckedAndFilesWithoutChecksumsStillLoad) {
  testing::TempDir dir;
  Model model = trained_model();
  const fs::path path = dir.path() / "w.safetensors";
  model.save_weights(path);
  const std::string good = read_file(path);
  write_file(dir.path() / "bad.safetensors", flip_in_tensor(good, "logits/bias", 1, 6));
  const std::string message = error_of([&] { model.load_weights(dir.path() / "bad.safetensors"); });
  EXPECT_NE(message.find("tensor 'logits/bias' does not match its checksum"), std::string::npos)
      << message;

  // The same file as another writer (Hugging Face's library) would write it: no checksum table.
  io::SafetensorsContents contents = io::load_safetensors(path);
  EXPECT_FALSE(contents.metadata.contains("mixprec_crc32c")) << "the table is not handed out";
  const Layout l = layout_of(good);
  json header = l.header;
  ASSERT_TRUE(header.at("__metadata__").contains("mixprec_crc32c"));
  header["__metadata__"].erase("mixprec_crc32c");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string plain(8, '\0');
  for (int i = 0; i < 8; ++i) plain[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  plain += text + good.substr(l.data);
  write_file(dir.path() / "plain.safetensors", plain);
  EXPECT_NO_THROW(model.load_weights(dir.path() / "plain.safetensors"));
}

TEST(CheckpointIntegrityTest, NonFiniteWeightsAreRefusedUnlessAllowed) {
  testing::TempDir dir;
  Model model = trained_model();
  std::vector<Tensor> weights = model.get_weights();
  std::vector<float> kernel = weights[0].to_vector<float>();
  kernel[1] = std::numeric_limits<float>::quiet_NaN();
  kernel[5] = std::numeric_limits<float>::infinity();
  weights[0] = from_vector(kernel, weights[0].shape());
  Model bad = trained_model();
  bad.set_weights(weights);
  const fs::path path = dir.path() / "nan.safetensors";
  bad.save_weights(path);

  const std::string message = error_of([&] { model.load_weights(path); });
  EXPECT_NE(message.find(path.string() + ": tensor 'hidden/kernel' holds 2 non-finite values"),
            std::string::npos)
      << message;
  EXPECT_NO_THROW(model.load_weights(path, {.allow_nonfinite = true}));

  // A checkpoint and a saved model alike.
  const fs::path checkpoint = dir.path() / "nan-ckpt.safetensors";
  io::save_checkpoint(bad, checkpoint);
  EXPECT_NE(error_of([&] { (void)io::load_checkpoint(model, checkpoint); }).find("non-finite"),
            std::string::npos);
  EXPECT_NO_THROW((void)io::load_checkpoint(model, checkpoint, {.allow_nonfinite = true}));
  bad.save(dir.path() / "saved");
  EXPECT_NE(error_of([&] { (void)load_model(dir.path() / "saved"); }).find("non-finite"),
            std::string::npos);
  EXPECT_NO_THROW((void)load_model(dir.path() / "saved", {.allow_nonfinite = true}));
}

// The checkpoint at `path` with `edit` applied to its state (checksums written anew, so that the
// range checks are what is tested).
template <typename Edit>
fs::path with_state(const fs::path& path, const fs::path& out, Edit&& edit) {
  io::SafetensorsContents file = io::load_safetensors(path);
  json state = json::parse(file.metadata.at("state"));
  edit(state);
  file.metadata["state"] = state.dump();
  io::save_safetensors(out, file.tensors, file.metadata);
  return out;
}

TEST(CheckpointIntegrityTest, OutOfRangeValuesAreErrorsNamingTheFileAndTheField) {
  testing::TempDir dir;
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = mixed_precision::LossScaleOptimizer(optimizers::Adam())});
  const auto data = testing::blobs(48, 1);
  const fs::path path = dir.path() / "c.safetensors";
  // Saved inside fit(), so that it has a position.
  struct Save : callbacks::Callback {
    fs::path path;
    void on_train_batch_end(std::int64_t, const callbacks::Logs&) override {
      io::save_checkpoint(model(), path);
    }
  };
  auto save = std::make_shared<Save>();
  save->path = path;
  model.fit(data.x, data.y,
            {.batch_size = 16, .epochs = 1, .verbose = Verbosity::silent, .callbacks = {save}});
  ASSERT_TRUE(io::read_checkpoint_info(path).in_fit);
  const fs::path bad = dir.path() / "bad.safetensors";

  struct Case {
    std::string pointer;
    json value;
    std::string field;  // the path the message must name
    std::string shown;  // the value as it must be printed
  };
  const std::string scalars = "/optimizer/scalars/";
  const std::vector<Case> cases = {
      {scalars + "loss_scale", 1e40, "state.optimizer.scalars.loss_scale", "1e+40"},
      {scalars + "loss_scale", 0, "state.optimizer.scalars.loss_scale", "0"},
      {scalars + "loss_scale", -2.0, "state.optimizer.scalars.loss_scale", "-2"},
      {scalars + "loss_scale", 1e-50, "state.optimizer.scalars.loss_scale", "1e-50"},
      {scalars + "dynamic_counter", 1e300, "state.optimizer.scalars.dynamic_counter", "1e+300"},
      {scalars + "skipped_steps", -1, "state.optimizer.scalars.skipped_steps", "-1"},
      {scalars + "last_step_skipped", 2, "state.optimizer.scalars.last_step_skipped", "2"},
      {"/optimizer/iterations", std::uint64_t{1} << 63, "state.optimizer.iterations",
       "9223372036854775808"},
      {"/optimizer/inner/0/iterations", -3, "state.optimizer.inner[0].iterations", "-3"},
      {"/position/epoch", (std::int64_t{1} << 32) + 2, "state.position.epoch", "4294967298"},
      {"/position/step", 1000, "state.position.step", "1000"},
      {"/position/step", 1.5, "state.position.step", "1.5"},
      {"/learning_rate", -0.5, "state.learning_rate", "-0.5"},
      {"/world_size", 0, "state.world_size", "0"},
      // The run's record: the epochs so far and the running sums of the epoch it stands in.
      {"/record/epochs",
       json::array(
           {{{"epoch", 1}, {"metrics", json::object()}, {"seconds", 1}, {"skipped_steps", 0}}}),
       "state.record.epochs", "1"},
      {"/record/epoch_sums/sums/0/count", 1.5, "state.record.epoch_sums.sums[0].count", "1.5"},
      {"/record/epoch_sums/sums/0/count", -48, "state.record.epoch_sums.sums[0].count", "-48"},
      {"/record/epoch_sums/sums/0/total", "lots", "state.record.epoch_sums.sums[0].total",
       "\"lots\""},
      {"/record/epoch_sums/sums/0/name", "accuracy", "state.record.epoch_sums.sums[0].name",
       "\"accuracy\""},
      {"/record/epoch_sums/skipped_before", 5, "state.record.epoch_sums.skipped_before", "5"},
      {"/record/epoch_sums/skipped_before", -1, "state.record.epoch_sums.skipped_before", "-1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field + " = " + c.value.dump());
    with_state(path, bad, [&](json& state) { state[json::json_pointer(c.pointer)] = c.value; });
    for (const bool load : {false, true}) {
      const std::string message = error_of([&] {
        if (load)
          (void)io::load_checkpoint(model, bad);
        else
          (void)io::read_checkpoint_info(bad);
      });
      EXPECT_NE(message.find(bad.string() + ": " + c.field), std::string::npos) << message;
      EXPECT_NE(message.find("got " + c.shown), std::string::npos) << message;
      EXPECT_EQ(message.find("negative"), std::string::npos) << message;
    }
  }
  // Another optimizer's state: named with the file.
  with_state(path, bad, [](json& state) { state["optimizer"]["inner"][0]["name"] = "SGD"; });
  EXPECT_NE(error_of([&] { (void)io::load_checkpoint(model, bad); }).find(bad.string() + ": "),
            std::string::npos);
  EXPECT_NO_THROW((void)io::load_checkpoint(model, path));
}

TEST(CheckpointIntegrityTest, ABadWeightsFileOfASavedModelIsBlamedOnItself) {
  testing::TempDir dir;
  Model model = trained_model();
  const fs::path saved = dir.path() / "m";
  model.save(saved);
  const fs::path weights = saved / "model.safetensors";
  const std::string good = read_file(weights);
  for (const std::string& bytes :
       {std::string("\x05garbage"), good.substr(0, good.size() / 2), std::string("abc")}) {
    write_file(weights, bytes);
    const std::string message = error_of([&] { (void)load_model(saved); });
    EXPECT_EQ(message.rfind(weights.string() + ": ", 0), 0u) << message;
    EXPECT_EQ(message.find("config.json"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace mixprec
