// io::save_checkpoint / load_checkpoint outside fit(): the round trip of weights, optimizer state,
// loss scale and random state; and every mismatch or bad file is a clear error that leaves the
// model, its optimizer and the random state untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/io/checkpoint.h"
#include "mixprec/mixprec.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

Model trained_model(std::uint64_t seed, double scale = 1024.0) {
  Model model = testing::tiny_model(seed, /*dropout=*/true);
  model.compile({.optimizer = mixed_precision::LossScaleOptimizer(
                     optimizers::Adam({.learning_rate = 0.01}),
                     {.initial_scale = scale, .dynamic_growth_steps = 3})});
  const auto data = testing::blobs(48, 1);
  model.fit(data.x, data.y, {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent});
  return model;
}

std::vector<std::vector<float>> weights_of(const Model& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& w : m.get_weights()) out.push_back(w.to_vector<float>());
  return out;
}

TEST(CheckpointTest, RoundTripRestoresWeightsOptimizerAndRandomState) {
  testing::TempDir dir;
  Model a = trained_model(1);
  const std::string path = dir.file("a.safetensors");
  io::save_checkpoint(a, path);
  const auto lso_a = mixed_precision::as_loss_scale_optimizer(a.optimizer());
  const std::uint64_t next_random = Generator(default_generator()).next_u64();

  Model b = trained_model(2, 8.0);  // other weights, other scale and counters
  set_seed(77);
  const io::CheckpointInfo info = io::load_checkpoint(b, path);
  EXPECT_EQ(info.iterations, 6);
  EXPECT_EQ(info.optimizer, "loss_scale_optimizer");
  ASSERT_TRUE(info.loss_scale.has_value());
  EXPECT_EQ(*info.loss_scale, lso_a->loss_scale());
  EXPECT_FALSE(info.in_fit);
  EXPECT_EQ(weights_of(b), weights_of(a));
  const auto lso_b = mixed_precision::as_loss_scale_optimizer(b.optimizer());
  EXPECT_EQ(lso_b->loss_scale(), lso_a->loss_scale());
  EXPECT_EQ(lso_b->dynamic_counter(), lso_a->dynamic_counter());
  EXPECT_EQ(b.optimizer().iterations(), a.optimizer().iterations());
  const auto slots_a = lso_a->inner_optimizer().get_state().slots;
  const auto slots_b = lso_b->inner_optimizer().get_state().slots;
  ASSERT_EQ(slots_a.size(), slots_b.size());
  for (std::size_t i = 0; i < slots_a.size(); ++i) {
    EXPECT_EQ(slots_a[i].value.to_vector<float>(), slots_b[i].value.to_vector<float>()) << i;
  }
  EXPECT_EQ(default_generator().next_u64(), next_random);
  const io::CheckpointInfo header = io::read_checkpoint_info(path);
  EXPECT_EQ(header.iterations, 6);
}

TEST(CheckpointTest, MismatchesAreErrorsThatChangeNothing) {
  testing::TempDir dir;
  Model a = trained_model(1);
  const std::string path = dir.file("a.safetensors");
  io::save_checkpoint(a, path);

  // Another architecture: the same layer name with another shape.
  clear_session();
  auto in = Input({2});
  auto out = layers::Dense(3, {.name = "logits"})(in);
  Model other(in, out);
  other.compile({.optimizer = mixed_precision::LossScaleOptimizer(optimizers::Adam())});
  const auto before = weights_of(other);
  try {
    io::load_checkpoint(other, path);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("logits/kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(8, 3)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(weights_of(other), before);
  // ... and a model without the checkpoint's layers: a missing variable.
  clear_session();
  auto in2 = Input({2});
  Model unrelated(in2, layers::Dense(3, {.name = "unrelated"})(in2));
  unrelated.compile({.optimizer = mixed_precision::LossScaleOptimizer(optimizers::Adam())});
  try {
    io::load_checkpoint(unrelated, path);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }

  // Another optimizer kind.
  Model c = trained_model(3);
  c.compile({.optimizer = optimizers::SGD()});
  const auto c_before = weights_of(c);
  const std::uint64_t random_before = Generator(default_generator()).next_u64();
  EXPECT_THROW(io::load_checkpoint(c, path), ValueError);
  EXPECT_EQ(weights_of(c), c_before);
  EXPECT_EQ(Generator(default_generator()).next_u64(), random_before);

  // Not compiled.
  Model d = testing::tiny_model(4, true);
  EXPECT_THROW(io::load_checkpoint(d, path), ValueError);
  EXPECT_THROW(io::save_checkpoint(d, dir.file("d.safetensors")), ValueError);
}

TEST(CheckpointTest, BadFilesAreIOErrors) {
  testing::TempDir dir;
  Model a = trained_model(1);
  const std::string path = dir.file("a.safetensors");
  io::save_checkpoint(a, path);
  const auto before = weights_of(a);

  // Truncated.
  const std::string cut = dir.file("cut.safetensors");
  std::filesystem::copy_file(path, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 7);
  EXPECT_THROW(io::load_checkpoint(a, cut), IOError);
  EXPECT_THROW(io::load_checkpoint(a, dir.file("missing.safetensors")), IOError);

  // A plain weights file is not a checkpoint.
  const std::string weights = dir.file("w.safetensors");
  a.save_weights(weights);
  try {
    io::load_checkpoint(a, weights);
    FAIL() << "expected IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("not a mixprec training checkpoint"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(weights_of(a), before);
}

}  // namespace
}  // namespace mixprec
