// Model::to_json / model_from_json round trips (include/mixprec/models/model_config.h): every layer
// class and every zoo model, under float32 and mixed_float16. A round trip must give the same
// JSON, the same summary(), the same variable names/shapes/dtypes, and after loading the weights
// bit-identical predictions.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

std::string summary_of(const Model& m) {
  std::ostringstream os;
  m.summary(os);
  return os.str();
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// to_json -> model_from_json -> load the weights: the same config, summary, variables and
// predictions (bit for bit) on `x`.
void expect_round_trip(const Model& model, const Tensor& x) {
  const std::string config = model.to_json();
  Model again = model_from_json(config);
  EXPECT_EQ(again.to_json(), config);
  EXPECT_EQ(summary_of(again), summary_of(model));
  const auto a = model.named_variables(), b = again.named_variables();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].value.shape(), b[i].value.shape()) << a[i].name;
    EXPECT_EQ(a[i].value.dtype(), b[i].value.dtype()) << a[i].name;
    EXPECT_EQ(a[i].trainable, b[i].trainable) << a[i].name;
  }
  testing::TempDir dir;
  model.save_weights(dir.path() / "w.safetensors");
  again.load_weights(dir.path() / "w.safetensors");
  Model original = model;
  EXPECT_TRUE(bit_identical(original.predict(x), again.predict(x)));
}

// Every layer class in include/mixprec/layers/ in one functional graph, with non-default options.
Model every_layer_model() {
  auto image = Input({8, 8, 3}, {.name = "image"});
  auto x = layers::ZeroPadding2D({1, 0}, {2, 1}, {.name = "pad"})(image);
  x = layers::Conv2D(4, {3, 2},
                     {.strides = {1, 2},
                      .padding = "same",
                      .activation = "relu",
                      .kernel_initializer = initializers::random_normal(0.0, 0.1),
                      .bias_initializer = initializers::constant(0.25),
                      .name = "conv"})(x);
  x = layers::BatchNormalization(
      {.momentum = 0.9, .epsilon = 1e-5, .center = true, .scale = false, .name = "bn"})(x);
  x = layers::DepthwiseConv2D(
      3, {.padding = "same", .depth_multiplier = 2, .use_bias = false, .name = "dw"})(x);
  x = layers::Resizing(6, 6, {.name = "resize"})(x);
  auto a = layers::MaxPooling2D(2, {.name = "maxpool"})(x);
  auto b = layers::AveragePooling2D({2, 2}, {.strides = 2, .name = "avgpool"})(x);
  auto sum = layers::Add({.name = "add"})({a, b});
  auto prod = layers::Multiply({.name = "mul"})({a, b});
  x = layers::Concatenate(-1, {.name = "concat"})({sum, prod});
  auto g = layers::GlobalAveragePooling2D({.keepdims = true, .name = "gap"})(x);
  x = layers::Flatten({.name = "flat"})(g);
  x = layers::Reshape({4, -1}, {.name = "reshape"})(x);
  x = layers::Flatten({.name = "flat2"})(x);
  x = layers::Dropout(0.3, {.seed = 7, .name = "drop"})(x);
  x = layers::Dense(5,
                    {.activation = "gelu", .kernel_initializer = "he_uniform", .name = "dense"})(x);
  x = layers::Softmax(-1, {.name = "softmax16"})(x);
  x = layers::Dense(3,
                    {.use_bias = false, .dtype = "float32", .name = "head", .trainable = false})(x);
  auto out = layers::Activation("softmax", {.dtype = "float32", .name = "probs"})(x);
  return Model(image, out, {.name = "every_layer"});
}

class ModelConfigTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelConfigTest, EveryLayerClassRoundTrips) {
  testing::PolicyGuard guard(GetParam());
  set_seed(3);
  Model m = every_layer_model();
  const auto j = nlohmann::json::parse(m.to_json());
  // Spot checks of the format: the classes, a policy, the graph.
  EXPECT_EQ(j["class_name"], "Functional");
  std::vector<std::string> classes;
  for (const auto& l : j["config"]["layers"]) classes.push_back(l["class_name"]);
  for (const char* cls : {"InputLayer", "ZeroPadding2D", "Conv2D", "BatchNormalization",
                          "DepthwiseConv2D", "Resizing", "MaxPooling2D", "AveragePooling2D", "Add",
                          "Multiply", "Concatenate", "GlobalAveragePooling2D", "Flatten", "Reshape",
                          "Dropout", "Dense", "Softmax", "Activation"}) {
    EXPECT_NE(std::find(classes.begin(), classes.end(), cls), classes.end()) << cls;
  }
  const auto& conv = j["config"]["layers"][2];
  EXPECT_EQ(conv["config"]["dtype"], GetParam());
  EXPECT_EQ(conv["config"]["kernel_size"], nlohmann::json({3, 2}));
  EXPECT_EQ(conv["config"]["kernel_initializer"]["class_name"], "random_normal");
  EXPECT_EQ(conv["inbound_nodes"], nlohmann::json::parse(R"([[["pad", 0, 0]]])"));
  EXPECT_EQ(j["config"]["input_layers"], nlohmann::json::parse(R"([["image", 0, 0]])"));
  EXPECT_EQ(j["config"]["output_layers"], nlohmann::json::parse(R"([["probs", 0, 0]])"));
  expect_round_trip(m, random_normal({2, 8, 8, 3}));
}

TEST_P(ModelConfigTest, SharedLayerAndSeveralInputsAndOutputs) {
  testing::PolicyGuard guard(GetParam());
  set_seed(4);
  auto a = Input({6}, {.name = "a"});
  auto b = Input({6}, {.name = "b"});
  layers::Dense shared(4, {.activation = "tanh", .name = "shared"});
  auto ha = shared(a), hb = shared(b);  // one layer, two calls (nodes 0 and 1)
  auto merged = layers::Concatenate({.name = "cat"})({ha, hb});
  auto out1 = layers::Dense(2, {.dtype = "float32", .name = "out1"})(merged);
  auto out2 = layers::Dense(1, {.dtype = "float32", .name = "out2"})(hb);
  Model m({a, b}, {out1, out2}, {.name = "two_heads"});
  const auto j = nlohmann::json::parse(m.to_json());
  for (const auto& l : j["config"]["layers"]) {
    if (l["config"]["name"] == "out2") {
      EXPECT_EQ(l["inbound_nodes"], nlohmann::json::parse(R"([[["shared", 1, 0]]])"));
    }
  }
  const std::string config = m.to_json();
  Model again = model_from_json(config);
  EXPECT_EQ(again.to_json(), config);
  again.set_weights(m.get_weights());
  const Tensor xa = random_normal({3, 6}), xb = random_normal({3, 6});
  const auto ya = m(std::vector<Tensor>{xa, xb});
  const auto yb = again(std::vector<Tensor>{xa, xb});
  ASSERT_EQ(ya.size(), 2u);
  ASSERT_EQ(yb.size(), 2u);
  EXPECT_TRUE(bit_identical(ya[0], yb[0]));
  EXPECT_TRUE(bit_identical(ya[1], yb[1]));
}

TEST_P(ModelConfigTest, SequentialAndNestedModelRoundTrip) {
  testing::PolicyGuard guard(GetParam());
  set_seed(5);
  Sequential inner({layers::InputLayer({4}, {.name = "inner_in"}),
                    layers::Dense(8, {.activation = "relu", .name = "inner_dense"}),
                    layers::Dropout(0.1, {.name = "inner_drop"})},
                   {.name = "inner"});
  expect_round_trip(inner, random_normal({2, 4}));
  auto in = Input({4}, {.name = "outer_in"});
  auto x = inner(in);
  auto out = layers::Dense(2, {.dtype = "float32", .name = "outer_dense"})(x);
  Model outer(in, out, {.name = "outer"});
  expect_round_trip(outer, random_normal({2, 4}));
}

TEST_P(ModelConfigTest, ZooModelsRoundTrip) {
  testing::PolicyGuard guard(GetParam());
  set_seed(6);
  expect_round_trip(applications::mlp({.units = 16, .hidden_layers = 2, .input_features = 12}),
                    random_normal({2, 12}));
  expect_round_trip(applications::cnn({.input_size = 8, .channels = 1, .classes = 4}),
                    random_normal({2, 8, 8, 1}));
  expect_round_trip(applications::efficientnet(0, {.input_size = 32, .classes = 5}),
                    random_normal({1, 32, 32, 3}));
  expect_round_trip(applications::resnet50({.input_size = 32, .classes = 5}),
                    random_normal({1, 32, 32, 3}));
}

INSTANTIATE_TEST_SUITE_P(Policies, ModelConfigTest, ::testing::Values("float32", "mixed_float16"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ModelConfigTest, LoadedModelKeepsTheSavedPolicyWhateverTheGlobalOne) {
  std::string config;
  {
    testing::PolicyGuard guard("mixed_float16");
    config = applications::mlp({.units = 8, .hidden_layers = 1, .input_features = 4}).to_json();
  }
  testing::PolicyGuard guard("float32");
  Model m = model_from_json(config);
  EXPECT_EQ(m.get_layer(1).dtype_policy().name(), "mixed_float16");
  EXPECT_EQ(m.get_layer(1).variable_dtype(), DType::float32);
  EXPECT_EQ(m.get_layer(1).compute_dtype(), DType::float16);
}

TEST(ModelConfigTest, CustomLayerPartsCannotBeDescribed) {
  auto in = Input({3});
  initializers::Initializer mine(
      "mine", [](const Shape& s, DType d, Generator&) { return zeros(s, {.dtype = d}); });
  auto out = layers::Dense(2, {.kernel_initializer = mine, .name = "d"})(in);
  Model m(in, out);
  try {
    (void)m.to_json();
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'mine' is a custom initializer"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mixprec
