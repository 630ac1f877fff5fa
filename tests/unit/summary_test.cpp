// Model::summary(): rows with "name (Type)", output shape, parameter count and policy for each
// layer, and the totals, for the DESIGN §1 model, a Sequential, frozen layers and a DAG.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "mixprec/layers/activation.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/merge.h"
#include "mixprec/mixprec.h"
#include "mixprec/models/model.h"
#include "mixprec/models/sequential.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace mp = mixprec;
using mixed_precision::Policy;

using testing::PolicyGuard;

std::string summary_of(const Model& m) {
  std::ostringstream os;
  m.summary(os);
  return os.str();
}

// The line of the table that starts with " <start>"; "" when none does.
std::string row(const std::string& table, const std::string& start) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(" " + start, 0) == 0) return line;
  }
  return "";
}

void expect_row(const std::string& table, const std::string& start,
                const std::vector<std::string>& cells) {
  const std::string line = row(table, start);
  ASSERT_FALSE(line.empty()) << "no row for " << start << " in\n" << table;
  for (const std::string& c : cells) {
    EXPECT_NE(line.find(c), std::string::npos) << "row '" << line << "' lacks '" << c << "'";
  }
}

TEST(SummaryTest, DesignSection1Model) {
  PolicyGuard guard("mixed_float16");
  auto inputs = mp::Input({784}, {.name = "digits"});
  auto x = mp::layers::Dense(4096, {.activation = "relu", .name = "dense_1"})(inputs);
  x = mp::layers::Dense(4096, {.activation = "relu", .name = "dense_2"})(x);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  mp::Model model(inputs, outputs, {.name = "mnist_mlp"});
  const std::string s = summary_of(model);
  EXPECT_NE(s.find("Model: \"mnist_mlp\""), std::string::npos) << s;
  EXPECT_NE(s.find("Layer (type)"), std::string::npos);
  EXPECT_NE(s.find("Output Shape"), std::string::npos);
  EXPECT_NE(s.find("Param #"), std::string::npos);
  expect_row(s, "digits (InputLayer)", {"(None, 784)", " 0 ", "float32"});
  expect_row(s, "dense_1 (Dense)", {"(None, 4096)", "3215360", "mixed_float16"});   // 784*4096+4096
  expect_row(s, "dense_2 (Dense)", {"(None, 4096)", "16781312", "mixed_float16"});  // 4096*4097
  expect_row(s, "dense_logits (Dense)", {"(None, 10)", "40970", "mixed_float16"});
  expect_row(s, "predictions (Activation)", {"(None, 10)", " 0 ", "float32"});
  // 3215360 + 16781312 + 40970
  EXPECT_NE(s.find("Total params: 20,037,642\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Trainable params: 20,037,642\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 0\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("Connected to"), std::string::npos);  // a chain needs no such column
}

TEST(SummaryTest, SequentialWithAFrozenLayer) {
  mp::Sequential model(
      {mp::layers::InputLayer({8}), mp::layers::Dense(4, {.name = "frozen", .trainable = false}),
       mp::layers::Dense(2, {.name = "top"})},
      {.name = "seq_summary"});
  const std::string s = summary_of(model);
  EXPECT_NE(s.find("Model: \"seq_summary\""), std::string::npos);
  EXPECT_EQ(s.find("InputLayer"), std::string::npos) << s;
  expect_row(s, "frozen (Dense)", {"(None, 4)", "36", "float32"});
  expect_row(s, "top (Dense)", {"(None, 2)", "10", "float32"});
  EXPECT_NE(s.find("Total params: 46\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Trainable params: 10\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 36\n"), std::string::npos) << s;
}

TEST(SummaryTest, DagShowsConnectionsSharedLayersAndNestedModels) {
  const KerasTensor a = Input({3}, {.name = "sa"}), b = Input({4}, {.name = "sb"});
  layers::Activation shared("relu", {.name = "shared_relu"});
  const KerasTensor ra = shared(a), rb = shared(b);
  const KerasTensor inner_in = Input({7});
  Model inner(inner_in, layers::Dense(2)(inner_in), {.name = "inner_block"});
  const KerasTensor cat = layers::Concatenate(-1, {.name = "joined"})({ra, rb});
  Model m({a, b}, inner(cat), {.name = "dag"});
  const std::string s = summary_of(m);
  EXPECT_NE(s.find("Connected to"), std::string::npos) << s;
  expect_row(s, "shared_relu (Activation)", {"multiple", "sa", "sb"});
  expect_row(s, "joined (Concatenate)", {"(None, 7)", "shared_relu[0], shared_relu[1]"});
  expect_row(s, "inner_block (Functional)", {"(None, 2)", "16", "joined"});
  EXPECT_NE(s.find("Total params: 16\n"), std::string::npos) << s;
}

TEST(SummaryTest, UnbuiltSequentialExplainsHowToBuild) {
  mp::Sequential model({mp::layers::Dense(2)}, {.name = "unbuilt_seq"});
  std::ostringstream os;
  try {
    model.summary(os);
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("unbuilt_seq"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("InputLayer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
