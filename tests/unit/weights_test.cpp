// Model::save_weights / load_weights: a bit-identical round trip (BatchNormalization's moving
// statistics included), and every mismatch an error naming the file and the variable that leaves
// the model untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

Model dense_bn(std::uint64_t seed, std::int64_t units = 6) {
  clear_session();
  set_seed(seed);
  auto in = Input({4});
  auto x = layers::Dense(units, {.name = "dense_1"})(in);
  x = layers::BatchNormalization({.name = "bn"})(x);
  return Model(in, layers::Dense(2, {.name = "out"})(x));
}

std::vector<std::vector<float>> weights_of(const Model& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& w : m.get_weights()) out.push_back(w.to_vector<float>());
  return out;
}

std::string message_of(Model& m, const std::filesystem::path& p) {
  try {
    m.load_weights(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WeightsTest, RoundTripIsBitIdentical) {
  testing::TempDir dir;
  Model a = dense_bn(1);
  // Non-default moving statistics: one training call updates them.
  (void)a(random_normal({8, 4}), CallOptions{.training = true});
  a.save_weights(dir.path() / "a.safetensors");
  const io::SafetensorsContents file = io::load_safetensors(dir.path() / "a.safetensors");
  std::vector<std::string> names;
  for (const auto& [n, t] : file.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"dense_1/kernel", "dense_1/bias", "bn/gamma",
                                             "bn/beta", "bn/moving_mean", "bn/moving_variance",
                                             "out/kernel", "out/bias"}));
  EXPECT_EQ(file.metadata.at("format"), "mixprec-weights");
  Model b = dense_bn(2);
  ASSERT_NE(weights_of(b), weights_of(a));
  b.load_weights(dir.path() / "a.safetensors");
  EXPECT_EQ(weights_of(b), weights_of(a));
}

TEST(WeightsTest, MismatchesNameTheVariableAndChangeNothing) {
  testing::TempDir dir;
  const auto path = dir.path() / "w.safetensors";
  Model target = dense_bn(3);
  const auto before = weights_of(target);

  dense_bn(4, 5).save_weights(path);  // dense_1 has 5 units: wrong shapes
  EXPECT_NE(message_of(target, path).find("dense_1/kernel: the file has float32 (4, 5)"),
            std::string::npos)
      << message_of(target, path);

  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& v : target.named_variables()) tensors.emplace_back(v.name, v.value);
  tensors[0].second = tensors[0].second.to(DType::float16);  // wrong dtype
  io::save_safetensors(path, tensors);
  EXPECT_NE(message_of(target, path).find("float16"), std::string::npos);

  tensors[0].second = tensors[0].second.to(DType::float32);
  tensors.pop_back();  // a missing variable
  io::save_safetensors(path, tensors);
  EXPECT_NE(message_of(target, path).find("no variable 'out/bias'"), std::string::npos);

  tensors.emplace_back("out/bias", zeros({2}));
  tensors.emplace_back("extra/kernel", zeros({1}));  // an extra one
  io::save_safetensors(path, tensors);
  EXPECT_NE(message_of(target, path).find("'extra/kernel'"), std::string::npos);

  EXPECT_NE(message_of(target, dir.path() / "missing").find("missing"), std::string::npos);
  EXPECT_EQ(weights_of(target), before);
}

}  // namespace
}  // namespace mixprec
