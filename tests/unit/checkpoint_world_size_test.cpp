// Checkpoints record the data-parallel world size: a checkpoint written by a group of another
// size is refused with one line naming both sizes (and nothing changes); a checkpoint without the
// field (written before it existed) reads as world size 1 and loads in one process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/checkpoint_state.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

Model compiled_model(std::uint64_t seed) {
  Model model = testing::tiny_model(seed, /*dropout=*/false);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1})});
  const auto data = testing::blobs(16, 1);
  model.fit(data.x, data.y, {.batch_size = 8, .epochs = 1, .verbose = Verbosity::silent});
  return model;
}

using io::load_safetensors;
using io::SafetensorsContents;
using io::save_safetensors;

// Rewrites the checkpoint's state JSON through `edit`.
template <typename F>
void edit_state(const std::string& path, F edit) {
  SafetensorsContents file = load_safetensors(path);
  auto state = nlohmann::json::parse(file.metadata.at("state"));
  edit(state);
  file.metadata["state"] = state.dump();
  save_safetensors(path, file.tensors, file.metadata);
}

std::vector<std::vector<float>> weights_of(const Model& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& w : m.get_weights()) out.push_back(w.to_vector<float>());
  return out;
}

TEST(CheckpointWorldSizeTest, WrittenAndReadBack) {
  ASSERT_EQ(distributed::world_size(), 1);
  testing::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  Model a = compiled_model(1);
  io::save_checkpoint(a, path);
  const auto state = nlohmann::json::parse(load_safetensors(path).metadata.at("state"));
  EXPECT_EQ(state.at("world_size"), 1);
  EXPECT_EQ(io::read_checkpoint_info(path).world_size, 1);
  EXPECT_EQ(io::load_checkpoint(a, path).world_size, 1);
}

TEST(CheckpointWorldSizeTest, AnotherWorldSizeIsAnErrorThatChangesNothing) {
  testing::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  io::save_checkpoint(compiled_model(1), path);
  edit_state(path, [](nlohmann::json& s) { s["world_size"] = 2; });
  EXPECT_EQ(io::read_checkpoint_info(path).world_size, 2);
  Model b = compiled_model(2);
  const auto before = weights_of(b);
  const auto iterations = b.optimizer().iterations();
  testing::expect_error<ValueError>(
      [&] { io::load_checkpoint(b, path); },
      {path, "world size 2", "this run has world size 1", "mpirun -np 2"});
  EXPECT_EQ(weights_of(b), before);
  EXPECT_EQ(b.optimizer().iterations(), iterations);

  edit_state(path, [](nlohmann::json& s) { s["world_size"] = "two"; });
  testing::expect_error<IOError>([&] { io::load_checkpoint(b, path); },
                                 {"state.world_size: must be an integer in [1, 16777216]"});
  edit_state(path, [](nlohmann::json& s) { s["world_size"] = 0; });
  testing::expect_error<IOError>([&] { io::read_checkpoint_info(path); }, {"world_size"});
}

TEST(CheckpointWorldSizeTest, OldCheckpointsWithoutTheFieldAreWorldSizeOne) {
  testing::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  Model a = compiled_model(1);
  io::save_checkpoint(a, path);
  edit_state(path, [](nlohmann::json& s) { s.erase("world_size"); });
  EXPECT_EQ(io::read_checkpoint_info(path).world_size, 1);
  Model b = compiled_model(2);
  EXPECT_EQ(io::load_checkpoint(b, path).world_size, 1);
  EXPECT_EQ(weights_of(b), weights_of(a));
}

TEST(CheckpointWorldSizeTest, TheCheckNamesBothSizes) {
  io::detail::check_world_size(4, 4, "ckpt");
  testing::expect_error<ValueError>([] { io::detail::check_world_size(1, 2, "ckpt"); },
                                    {"ckpt: ", "group of 1 process (world size 1)",
                                     "this run has world size 2", "without mpirun"});
  testing::expect_error<ValueError>([] { io::detail::check_world_size(8, 2, "ckpt"); },
                                    {"8 processes (world size 8)", "world size 2"});
}

}  // namespace
}  // namespace mixprec
