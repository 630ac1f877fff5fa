// model_from_json on invalid configs: each class of problem is a mixprec::ValueError whose one-line
// message names the place and the problem, raised before anything is built; and the limits that
// keep a hostile config from allocating gigabytes.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using nlohmann::json;

// in (4) -> dense_1 (8, relu) -> dense_2 (3) -> probs (softmax, float32)
json base_config() {
  clear_session();
  auto in = Input({4}, {.name = "in"});
  auto x = layers::Dense(8, {.activation = "relu", .name = "dense_1"})(in);
  x = layers::Dense(3, {.name = "dense_2"})(x);
  auto out = layers::Activation("softmax", {.dtype = "float32", .name = "probs"})(x);
  return json::parse(Model(in, out, {.name = "small"}).to_json());
}

json& layer(json& config, int i) { return config["config"]["layers"][i]; }

// model_from_json(config) must throw ValueError whose message contains `expected`, on one line.
void expect_refused(const json& config, const std::string& expected,
                    ModelConfigLimits limits = {}) {
  try {
    (void)model_from_json(config.dump(), limits);
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(expected), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

void expect_refused_text(const std::string& text, const std::string& expected,
                         ModelConfigLimits limits = {}) {
  try {
    (void)model_from_json(text, limits);
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(ModelConfigErrorsTest, TheBaseConfigLoads) {
  EXPECT_NO_THROW(model_from_json(base_config().dump()));
}

TEST(ModelConfigErrorsTest, NotJsonOrNotAModel) {
  expect_refused_text("", "not valid JSON");
  expect_refused_text("{\"class_name\": ", "not valid JSON");
  expect_refused_text("[1, 2]", "model config: expected a JSON object, got array");
  json c = base_config();
  c["class_name"] = "Transformer";
  expect_refused(c, R"("class_name" must be "Functional" or "Sequential", got "Transformer")");
  c = base_config();
  c.erase("config");
  expect_refused(c, R"(missing key "config")");
  c = base_config();
  c["extra"] = 1;
  expect_refused(c, R"(unknown key "extra")");
}

TEST(ModelConfigErrorsTest, UnknownLayerClass) {
  json c = base_config();
  layer(c, 1)["class_name"] = "Dense3D";
  expect_refused(c, R"(layers[1] (dense_1): unknown layer class "Dense3D")");
}

TEST(ModelConfigErrorsTest, ValuesOutOfRange) {
  json c = base_config();
  layer(c, 2)["config"]["units"] = -4;
  expect_refused(c, R"(layers[2] (dense_2): "units" must be a positive integer, got -4)");
  layer(c, 2)["config"]["units"] = 0;
  expect_refused(c, R"("units" must be a positive integer, got 0)");
  layer(c, 2)["config"]["units"] = 3.5;
  expect_refused(c, R"("units" must be a positive integer, got 3.5)");
  layer(c, 2)["config"]["units"] = 18446744073709551615ull;
  expect_refused(c, R"("units" must be a positive integer at most 1048576)");
  c = base_config();
  layer(c, 1)["config"]["activation"] = "relu7";
  expect_refused(c, R"(layers[1] (dense_1): "activation" must be an activation name)");
  c = base_config();
  layer(c, 1)["config"]["dtype"] = "mixed_float8";
  expect_refused(c, R"("dtype" must be a policy name (float32, )");
  c = base_config();
  layer(c, 1)["config"]["kernel_initializer"] = "glorot_sideways";
  expect_refused(c, R"("kernel_initializer" must be an initializer name)");
  c = base_config();
  layer(c, 1)["config"]["kernel_initializer"] =
      json::parse(R"({"class_name": "random_normal", "config": {"mean": 0, "stddev": -1}})");
  expect_refused(c, R"("stddev" must be a number >= 0, got -1)");
  c = base_config();
  layer(c, 0)["config"]["batch_shape"] = json::array({-1, 0});
  expect_refused(c, R"(layers[0] (in): "batch_shape" must be a list of -1 (unknown) or positive)");
  c = base_config();
  layer(c, 0)["config"]["dtype"] = "float13";
  expect_refused(c, R"("dtype" must be a dtype name)");
}

TEST(ModelConfigErrorsTest, KeysMissingExtraOrOfTheWrongType) {
  json c = base_config();
  layer(c, 1)["config"].erase("use_bias");
  expect_refused(c, R"(layers[1] (dense_1): missing key "use_bias")");
  c = base_config();
  layer(c, 1)["config"]["bogus"] = true;
  expect_refused(c, R"(layers[1] (dense_1): unknown key "bogus")");
  c = base_config();
  layer(c, 1)["config"]["use_bias"] = "yes";
  expect_refused(c, R"("use_bias" must be true or false, got "yes")");
  c = base_config();
  layer(c, 1)["config"]["name"] = 5;
  expect_refused(c, R"("name" must be a string, got 5)");
  c = base_config();
  layer(c, 1)["config"]["name"] = "a/b";
  expect_refused(c, R"("name" must be a name without '/')");
  c = base_config();
  layer(c, 1)["config"] = json::array();
  expect_refused(c, "layers[1]: expected a JSON object, got array");
}

TEST(ModelConfigErrorsTest, OtherLayerClassesCheckTheirOptions) {
  const auto with_layer = [](const json& entry) {
    json c = base_config();
    json e = entry;
    e["inbound_nodes"] = json::parse(R"([[["dense_1", 0, 0]]])");
    c["config"]["layers"][2] = e;
    return c;
  };
  json drop = {{"class_name", "Dropout"},
               {"config",
                {{"name", "dense_2"},
                 {"trainable", true},
                 {"dtype", "float32"},
                 {"rate", 1.0},
                 {"seed", nullptr}}}};
  expect_refused(with_layer(drop),
                 R"(layers[2] (dense_2): "rate" must be a number in [0, 1), got 1.0)");
  drop["config"]["rate"] = 0.5;
  drop["config"]["seed"] = -3;
  expect_refused(with_layer(drop), R"("seed" must be null or an integer >= 0, got -3)");
  json conv = {{"class_name", "Conv2D"},
               {"config",
                {{"name", "dense_2"},
                 {"trainable", true},
                 {"dtype", "float32"},
                 {"filters", 6},
                 {"kernel_size", {0, 3}},
                 {"strides", {1, 1}},
                 {"padding", "valid"},
                 {"dilation_rate", {1, 1}},
                 {"groups", 4},
                 {"activation", ""},
                 {"use_bias", true},
                 {"kernel_initializer", "glorot_uniform"},
                 {"bias_initializer", "zeros"}}}};
  expect_refused(with_layer(conv), R"("kernel_size" must be a positive integer, got 0)");
  conv["config"]["kernel_size"] = {3, 5000};
  expect_refused(with_layer(conv), R"("kernel_size" must be a positive integer at most 1024)");
  conv["config"]["kernel_size"] = {3, 3};
  expect_refused(with_layer(conv), R"("groups" must be a divisor of "filters" (6), got 4)");
  conv["config"]["groups"] = 1;
  conv["config"]["padding"] = "full";
  expect_refused(with_layer(conv), R"("padding" must be "valid" or "same", got "full")");
  conv["config"]["padding"] = "valid";
  // A valid Conv2D on a rank-2 input: refused by the layer's own shape check, before building.
  expect_refused(with_layer(conv), "layers[2] (dense_2): call 0: ");
  json bn = {{"class_name", "BatchNormalization"},
             {"config",
              {{"name", "dense_2"},
               {"trainable", true},
               {"dtype", "float32"},
               {"axis", -1},
               {"momentum", 1.5},
               {"epsilon", 1e-3},
               {"center", true},
               {"scale", true},
               {"beta_initializer", "zeros"},
               {"gamma_initializer", "ones"},
               {"moving_mean_initializer", "zeros"},
               {"moving_variance_initializer", "ones"}}}};
  expect_refused(with_layer(bn), R"("momentum" must be a number in [0, 1], got 1.5)");
  json reshape = {{"class_name", "Reshape"},
                  {"config",
                   {{"name", "dense_2"},
                    {"trainable", true},
                    {"dtype", "float32"},
                    {"target_shape", {-1, -1}}}}};
  expect_refused(with_layer(reshape), R"("target_shape" must be a list with at most one -1)");
  json pad = {{"class_name", "ZeroPadding2D"},
              {"config",
               {{"name", "dense_2"},
                {"trainable", true},
                {"dtype", "float32"},
                {"padding", {{1, -1}, {0, 0}}}}}};
  expect_refused(with_layer(pad), R"("padding" must be an integer >= 0, got -1)");
  json resize = {{"class_name", "Resizing"},
                 {"config",
                  {{"name", "dense_2"},
                   {"trainable", true},
                   {"dtype", "float32"},
                   {"height", 4},
                   {"width", 4},
                   {"interpolation", "nearest"}}}};
  expect_refused(with_layer(resize), R"("interpolation" must be "bilinear", got "nearest")");
}

TEST(ModelConfigErrorsTest, GraphReferences) {
  json c = base_config();
  layer(c, 2)["inbound_nodes"] = json::parse(R"([[["nope", 0, 0]]])");
  expect_refused(c,
                 R"(layers[2] (dense_2): inbound_nodes[0][0] refers to an unknown layer "nope")");
  layer(c, 2)["inbound_nodes"] = json::parse(R"([[["dense_1", 1, 0]]])");
  expect_refused(c,
                 R"(inbound_nodes[0][0] refers to call 1 of layer "dense_1", which has 1 call(s))");
  layer(c, 2)["inbound_nodes"] = json::parse(R"([[["dense_1", 0, 2]]])");
  expect_refused(
      c, R"(inbound_nodes[0][0] refers to output 2 of layer "dense_1", which has 1 output(s))");
  layer(c, 2)["inbound_nodes"] = json::parse(R"([[["dense_1", 0]]])");
  expect_refused(c, "inbound_nodes[0][0] must be [layer name, node index, tensor index]");
  layer(c, 2)["inbound_nodes"] = json::array();
  expect_refused(c, R"(layers[2] (dense_2): the layer is never called)");
  c = base_config();
  c["config"]["output_layers"] = json::parse(R"([["ghost", 0, 0]])");
  expect_refused(c, R"(config: output_layers[0] refers to an unknown layer "ghost")");
  c = base_config();
  c["config"]["input_layers"] = json::parse(R"([["dense_1", 0, 0]])");
  expect_refused(c, R"(config: "input_layers" names "dense_1", which is not an InputLayer)");
  c = base_config();
  layer(c, 2)["config"]["name"] = "dense_1";
  expect_refused(c,
                 R"(layers[2] (dense_1): a second layer named "dense_1" (names must be unique))");
}

TEST(ModelConfigErrorsTest, Cycles) {
  json c = base_config();
  // dense_1 reads dense_2, which reads dense_1.
  layer(c, 1)["inbound_nodes"] = json::parse(R"([[["dense_2", 0, 0]]])");
  expect_refused(c, "inbound_nodes[0] can never run: its inputs form a cycle");
  c = base_config();
  layer(c, 1)["inbound_nodes"] = json::parse(R"([[["dense_1", 0, 0]]])");  // reads itself
  expect_refused(c, "can never run: its inputs form a cycle");
}

TEST(ModelConfigErrorsTest, SequentialErrors) {
  clear_session();
  Sequential s({layers::InputLayer({3}, {.name = "in"}), layers::Dense(2, {.name = "d"})},
               {.name = "seq"});
  json c = json::parse(s.to_json());
  EXPECT_NO_THROW(model_from_json(c.dump()));
  std::swap(c["config"]["layers"][0], c["config"]["layers"][1]);
  expect_refused(c, "layers[1] (in): an InputLayer can only be the first layer");
  c = json::parse(s.to_json());
  c["config"]["layers"][1]["inbound_nodes"] = json::array();
  expect_refused(c, R"(layers[1]: unknown key "inbound_nodes")");
}

TEST(ModelConfigErrorsTest, LimitsOnLayersAndParameters) {
  const json c = base_config();
  expect_refused(c, "the model has more than 3 layers", {.max_layers = 3});
  // 4*8+8 + 8*3+3 = 67 parameters
  EXPECT_NO_THROW(model_from_json(c.dump(), {.max_params = 67}));
  expect_refused(c, "the model would have more than 66 parameters", {.max_params = 66});
  expect_refused(c, "more than the 100 allowed", {.max_bytes = 100});
  // A hostile config: Dense(1048576) on 1048576 features would be 2^40 parameters (4 TiB). The
  // check pass refuses it without allocating (and quickly).
  json huge = c;
  layer(huge, 0)["config"]["batch_shape"] = json::array({-1, 1 << 20});
  layer(huge, 1)["config"]["units"] = 1 << 20;
  const auto start = std::chrono::steady_clock::now();
  expect_refused(huge, "layers[1] (dense_1): the model would have more than 2000000000 parameters");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Deep nesting of plain JSON is refused before parsing.
  expect_refused_text(std::string(100000, '[') + std::string(100000, ']'),
                      "nests arrays and objects");
}

TEST(ModelConfigErrorsTest, NestedModelsAreCheckedAndLimited) {
  clear_session();
  Sequential inner({layers::InputLayer({3}, {.name = "inner_in"}), layers::Dense(2, {.name = "d"})},
                   {.name = "inner"});
  auto in = Input({3}, {.name = "in"});
  Model outer(in, inner(in), {.name = "outer"});
  json c = json::parse(outer.to_json());
  EXPECT_NO_THROW(model_from_json(c.dump()));
  expect_refused(c, "models nested more than 0 deep", {.max_nesting = 0});
  c["config"]["layers"][1]["config"]["layers"][1]["config"]["units"] = -1;
  expect_refused(c,
                 R"(layers[1] (inner)/layers[1] (d): "units" must be a positive integer, got -1)");
}

}  // namespace
}  // namespace mixprec
