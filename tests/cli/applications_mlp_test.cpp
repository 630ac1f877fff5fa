// applications::mlp, the model `mixprec train` builds: seed 001's layer stack, float32 output under
// every policy, parameter counts, seeding, and option validation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

namespace mp = mixprec;

class MlpTest : public ::testing::Test {
 protected:
  void TearDown() override { mp::mixed_precision::set_global_policy("float32"); }
};

TEST_F(MlpTest, LayersFollowSeed001) {
  auto model = applications::mlp({.units = 24, .hidden_layers = 2, .input_features = 20});
  std::vector<std::string> names;
  for (const auto& layer : model.layers()) names.push_back(layer.name());
  EXPECT_EQ(names, (std::vector<std::string>{"digits", "dense_1", "dense_2", "dense_logits",
                                             "predictions"}));
  EXPECT_EQ(model.get_layer("dense_1").class_name(), "Dense");
  EXPECT_EQ(layers::Dense(model.get_layer("dense_1")).activation(), "relu");
  EXPECT_EQ(layers::Dense(model.get_layer("dense_logits")).activation(), "");
  EXPECT_EQ(layers::Dense(model.get_layer("dense_logits")).units(), 10);
  EXPECT_EQ(model.get_layer("predictions").class_name(), "Activation");
  // 20*24+24 + 24*24+24 + 24*10+10
  EXPECT_EQ(model.count_params(), 20 * 24 + 24 + 24 * 24 + 24 + 24 * 10 + 10);
  EXPECT_EQ(applications::mlp_kernel_elements({.units = 24, .input_features = 20}),
            20 * 24 + 24 * 24 + 24 * 10);
}

TEST_F(MlpTest, MixedPolicyKeepsFloat32WeightsAndOutput) {
  mp::mixed_precision::set_global_policy("mixed_bfloat16");
  auto model = applications::mlp({.units = 8, .input_features = 6, .classes = 3});
  layers::Dense dense(model.get_layer("dense_2"));
  EXPECT_EQ(dense.compute_dtype(), DType::bfloat16);
  EXPECT_EQ(dense.kernel().dtype(), DType::float32);
  EXPECT_EQ(model.get_layer("predictions").compute_dtype(), DType::float32);
  const Tensor x = mp::random_uniform({5, 6});
  const Tensor p = model(x);
  ASSERT_EQ(p.dtype(), DType::float32);
  ASSERT_EQ(p.shape(), Shape({5, 3}));
  // Softmax rows are probabilities.
  const auto v = p.to_vector<float>();
  for (int r = 0; r < 5; ++r) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) {
      EXPECT_GE(v[r * 3 + c], 0.0f);
      sum += v[r * 3 + c];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_F(MlpTest, ExplicitDtypeOverridesTheGlobalPolicy) {
  auto model = applications::mlp({.units = 8, .input_features = 6, .dtype = "mixed_float16"});
  EXPECT_EQ(model.get_layer("dense_1").compute_dtype(), DType::float16);
  EXPECT_EQ(model.get_layer("dense_logits").compute_dtype(), DType::float16);
  EXPECT_EQ(model.get_layer("predictions").compute_dtype(), DType::float32);
}

TEST_F(MlpTest, NoHiddenLayersIsASoftmaxClassifier) {
  auto model = applications::mlp({.hidden_layers = 0, .input_features = 5, .classes = 4});
  EXPECT_EQ(model.count_params(), 5 * 4 + 4);
  EXPECT_EQ(
      applications::mlp_kernel_elements({.hidden_layers = 0, .input_features = 5, .classes = 4}),
      20);
}

TEST_F(MlpTest, SameSeedSameWeights) {
  mp::set_seed(7);
  auto a = applications::mlp({.units = 4, .input_features = 3}).get_weights();
  mp::set_seed(7);
  auto b = applications::mlp({.units = 4, .input_features = 3}).get_weights();
  auto c = applications::mlp({.units = 4, .input_features = 3}).get_weights();
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << i;
    differs = differs || a[i].to_vector<float>() != c[i].to_vector<float>();
  }
  EXPECT_TRUE(differs) << "a later draw should give other kernels";
}

TEST_F(MlpTest, InvalidOptionsThrowValueError) {
  EXPECT_THROW(applications::mlp({.units = 0}), ValueError);
  EXPECT_THROW(applications::mlp({.hidden_layers = -1}), ValueError);
  EXPECT_THROW(applications::mlp({.input_features = 0}), ValueError);
  EXPECT_THROW(applications::mlp({.classes = 1}), ValueError);
  EXPECT_THROW(applications::mlp({.activation = "no_such_activation"}), ValueError);
  try {
    applications::mlp({.units = -3});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("units must be >= 1, got -3"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mixprec
