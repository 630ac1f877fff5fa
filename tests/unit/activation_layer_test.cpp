// Activation and Softmax layers, and apply_activation: every named activation against its formula
// evaluated here in double; softmax over other axes; the float32 output layer of seed 001.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/activations.h"
#include "mixprec/layers/activation.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;
using testing::all_close;

using testing::PolicyGuard;

const std::vector<double> kX = {-7.5, -2, -0.5, 0, 0.25, 1, 3, 6.5};

Tensor x_tensor(DType dtype = kFloat32) { return from_vector(kX, {2, 4}, {.dtype = dtype}); }

Tensor expected(const std::function<double(double)>& f) {
  std::vector<double> y;
  for (double v : kX) y.push_back(f(v));
  return from_vector(y, {2, 4}, {.dtype = kFloat64});
}

double sigmoid_ref(double v) { return 1 / (1 + std::exp(-v)); }

TEST(ActivationLayerTest, ElementwiseActivationsMatchTheirFormulas) {
  const std::vector<std::pair<std::string, std::function<double(double)>>> cases = {
      {"linear", [](double v) { return v; }},
      {"relu", [](double v) { return v > 0 ? v : 0; }},
      {"relu6", [](double v) { return std::min(std::max(v, 0.0), 6.0); }},
      {"sigmoid", sigmoid_ref},
      {"tanh", [](double v) { return std::tanh(v); }},
      {"gelu", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"gelu_tanh",
       [](double v) {
         const double c = std::sqrt(2.0 / 3.141592653589793);
         return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v)));
       }},
      {"swish", [](double v) { return v * sigmoid_ref(v); }},
      {"silu", [](double v) { return v * sigmoid_ref(v); }},
  };
  for (const auto& [name, f] : cases) {
    layers::Activation layer(name);
    const Tensor y = layer(x_tensor());
    EXPECT_EQ(y.dtype(), kFloat32) << name;
    EXPECT_TRUE(all_close(y, expected(f), {2e-6, 1e-6})) << name;
    EXPECT_TRUE(all_close(apply_activation(name, x_tensor()), expected(f), {2e-6, 1e-6})) << name;
  }
}

TEST(ActivationLayerTest, SoftmaxAndLogSoftmaxNormaliseRows) {
  std::vector<double> soft, logsoft;
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int c = 0; c < 4; ++c) z += std::exp(kX[r * 4 + c]);
    for (int c = 0; c < 4; ++c) {
      soft.push_back(std::exp(kX[r * 4 + c]) / z);
      logsoft.push_back(kX[r * 4 + c] - std::log(z));
    }
  }
  EXPECT_TRUE(all_close(layers::Activation("softmax")(x_tensor()),
                        from_vector(soft, {2, 4}, {.dtype = kFloat64}), {2e-6, 1e-7}));
  EXPECT_TRUE(all_close(layers::Activation("log_softmax")(x_tensor()),
                        from_vector(logsoft, {2, 4}, {.dtype = kFloat64}), {2e-6, 1e-6}));
}

TEST(ActivationLayerTest, SoftmaxLayerNormalisesTheGivenAxis) {
  // Over axis 0 of (2, 4): each column sums to one.
  std::vector<double> col(8);
  for (int c = 0; c < 4; ++c) {
    const double z = std::exp(kX[c]) + std::exp(kX[4 + c]);
    col[c] = std::exp(kX[c]) / z;
    col[4 + c] = std::exp(kX[4 + c]) / z;
  }
  layers::Softmax softmax0(0);
  EXPECT_EQ(softmax0.axis(), 0);
  EXPECT_TRUE(
      all_close(softmax0(x_tensor()), from_vector(col, {2, 4}, {.dtype = kFloat64}), {2e-6, 1e-7}));
  EXPECT_EQ(layers::Softmax().axis(), -1);
  EXPECT_EQ(layers::Softmax(2)(Input({3, 5})).shape(), (PartialShape{-1, 3, 5}));
  try {
    layers::Softmax(3, {.name = "sm"})(Input({4}));
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("sm: Softmax over axis 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(None, 4)"), std::string::npos) << e.what();
  }
}

TEST(ActivationLayerTest, Float32OutputLayerUnderMixedCastsItsInput) {
  // Seed 001's "CORRECT" model: the softmax layer with dtype float32 outputs float32.
  PolicyGuard guard("mixed_float16");
  layers::Activation mixed_softmax("softmax");
  layers::Activation f32_softmax("softmax", {.dtype = "float32", .name = "predictions_probe"});
  const Tensor x16 = x_tensor(kFloat16);
  EXPECT_EQ(mixed_softmax(x16).dtype(), kFloat16);
  EXPECT_EQ(f32_softmax(x16).dtype(), kFloat32);
  EXPECT_EQ(f32_softmax.name(), "predictions_probe");
  EXPECT_EQ(f32_softmax(Input({10}, {.dtype = kFloat16})).dtype(), kFloat32);
  EXPECT_EQ(mixed_softmax(Input({10})).dtype(), kFloat16);
  // Rows of a float32 softmax sum to one closely.
  const auto p = f32_softmax(x16).to_vector<double>();
  EXPECT_NEAR(p[0] + p[1] + p[2] + p[3], 1.0, 1e-6);
}

TEST(ActivationLayerTest, UnknownNameListsTheValidOnes) {
  for (auto f : {std::function<void()>([] { layers::Activation("softplus"); }),
                 std::function<void()>([] { apply_activation("softplus", ones({2})); })}) {
    try {
      f();
      ADD_FAILURE() << "expected ValueError";
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("softplus"), std::string::npos) << msg;
      for (const std::string& n : activation_names())
        EXPECT_NE(msg.find(n), std::string::npos) << n;
    }
  }
  EXPECT_EQ(activation_names().size(), 11u);
}

TEST(ActivationLayerTest, GradientFlowsThroughTheLayer) {
  layers::Activation relu("relu");
  Tensor x = x_tensor();
  x.set_requires_grad(true);
  const Tensor g = grad(sum(relu(x)), {x})[0];
  std::vector<double> want;
  for (double v : kX) want.push_back(v > 0 ? 1 : 0);
  EXPECT_EQ(g.to_vector<double>(), want);
}

}  // namespace
}  // namespace mixprec
