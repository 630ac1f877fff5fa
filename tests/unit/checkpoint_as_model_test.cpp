// A training checkpoint read as Keras users read a ModelCheckpoint file: Model::load_weights takes
// its model part, load_model builds the model it holds (architecture and compile settings stored
// beside the state), and a file of another kind is refused with a message naming what was found
// and which call reads it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

Model trained(std::uint64_t seed) {
  Model model = testing::tiny_model(seed);
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}), .metrics = {"accuracy"}});
  const auto data = testing::blobs(48, 1);
  model.fit(data.x, data.y, {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent});
  return model;
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor ca = a[i].contiguous(), cb = b[i].contiguous();
    if (ca.dtype() != cb.dtype() || ca.shape() != cb.shape()) return false;
    if (std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) != 0) return false;
  }
  return true;
}

TEST(CheckpointAsModelTest, LoadWeightsTakesTheModelPart) {
  testing::TempDir dir;
  Model a = trained(1);
  const std::string path = dir.file("best-02-0.426.safetensors");
  io::save_checkpoint(a, path);
  Model b = testing::tiny_model(7);  // same architecture, other weights
  ASSERT_FALSE(same_bits(a.get_weights(), b.get_weights()));
  b.load_weights(path);
  EXPECT_TRUE(same_bits(a.get_weights(), b.get_weights()));
}

TEST(CheckpointAsModelTest, LoadWeightsOfAnotherModelNamesTheCheckpoint) {
  testing::TempDir dir;
  Model a = trained(1);
  const std::string path = dir.file("ckpt.safetensors");
  io::save_checkpoint(a, path);
  clear_session();
  auto inputs = Input({2});
  Model other(inputs, layers::Dense(5, {.name = "wide"})(inputs));
  testing::expect_error<ValueError>([&] { other.load_weights(path); },
                                    {path, "training checkpoint", "wide/kernel"});
}

TEST(CheckpointAsModelTest, LoadModelBuildsCompilesAndPredictsAsTheCheckpointedModel) {
  testing::TempDir dir;
  Model a = trained(2);
  const std::string path = dir.file("ckpt-3.safetensors");
  io::save_checkpoint(a, path);
  Model b = load_model(path);
  EXPECT_TRUE(same_bits(a.get_weights(), b.get_weights()));
  const auto data = testing::blobs(12, 5);
  EXPECT_TRUE(same_bits({a.predict(data.x)}, {b.predict(data.x)}));
  // Compiled as it was: evaluate reports the same metrics.
  const Scores sa = a.evaluate(data.x, data.y, {.verbose = Verbosity::silent});
  const Scores sb = b.evaluate(data.x, data.y, {.verbose = Verbosity::silent});
  ASSERT_EQ(sa.values.size(), sb.values.size());
  EXPECT_EQ(sb.values[1].first, "accuracy");
  EXPECT_EQ(sa[0], sb[0]);
}

TEST(CheckpointAsModelTest, LoadModelOfAWeightsFileSaysWhatItIsAndWhatReadsIt) {
  testing::TempDir dir;
  Model a = trained(3);
  const std::string path = dir.file("weights.safetensors");
  a.save_weights(path);
  testing::expect_error<IOError>([&] { (void)load_model(path); },
                                 {path, "weights file", "load_weights", "Model::save"});
}

TEST(CheckpointAsModelTest, LoadModelOfAForeignSafetensorsFileSaysWhatReadsIt) {
  testing::TempDir dir;
  const std::string path = dir.file("foreign.safetensors");
  io::save_safetensors(path, {{"w", zeros({2})}}, {{"format", "pt"}});
  testing::expect_error<IOError>([&] { (void)load_model(path); },
                                 {path, "\"pt\"", "Model::save", "checkpoint"});
}

TEST(CheckpointAsModelTest, LoadModelOfAMissingPathNamesBothKinds) {
  testing::TempDir dir;
  const std::string path = dir.file("absent");
  testing::expect_error<IOError>([&] { (void)load_model(path); },
                                 {path, "no such file or directory", "Model::save", "checkpoint"});
}

}  // namespace
}  // namespace mixprec
