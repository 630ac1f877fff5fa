// Functional models: the DESIGN §1 program, a two-input / two-output graph with a shared layer
// (values and gradients worked out here from the weights), nested models, graph errors, input
// checks, the trainable flag, weights round trips and seeded rebuilds.
#include "mixprec/models/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/activation.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/merge.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace mp = mixprec;
using mixed_precision::Policy;
using testing::all_close;

using testing::PolicyGuard;

using testing::expect_error;

Tensor t(const std::vector<double>& v, const Shape& s) { return from_vector(v, s); }

TEST(ModelTest, DesignSection1) {
  PolicyGuard guard;
  mp::mixed_precision::set_global_policy("mixed_float16");
  auto inputs = mp::Input({784}, {.name = "digits"});
  mp::layers::Dense dense1(4096, {.activation = "relu", .name = "dense_1"});
  auto x = dense1(inputs);
  EXPECT_EQ(x.dtype(), kFloat16);
  EXPECT_EQ(dense1.kernel().dtype(), kFloat32);
  x = mp::layers::Dense(4096, {.activation = "relu"})(x);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  EXPECT_EQ(x.dtype(), kFloat16);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  EXPECT_EQ(outputs.dtype(), kFloat32);
  EXPECT_EQ(outputs.shape(), (PartialShape{-1, 10}));
  mp::Model model(inputs, outputs);
  const Tensor some_tensor = random_uniform({2, 784});
  auto y = model(some_tensor, {.training = true});
  EXPECT_EQ(y.dtype(), kFloat32);
  ASSERT_EQ(y.shape(), (Shape{2, 10}));
  const auto p = y.to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 10; ++c) s += p[r * 10 + c];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  EXPECT_EQ(model.layers().size(), 5u);
  EXPECT_EQ(model.get_layer("dense_1").class_name(), "Dense");
  EXPECT_EQ(model.trainable_variables().size(), 6u);
  EXPECT_EQ(model.count_params(), 784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10);
  EXPECT_EQ(model.input_names(), (std::vector<std::string>{"digits"}));
  EXPECT_EQ(model.output_names(), (std::vector<std::string>{"predictions"}));
}

// Two inputs, two outputs, one Dense applied to both inputs:
//   ha = a K + c, hb = b K + c (shared K (3, 2), c (2,))
//   out1 = (ha + hb) W + d      (W (2, 1), d (1,))
//   out2 = concat(ha, b)        ((batch, 5))
struct TwoByTwo {
  KerasTensor a = Input({3}, {.name = "in_a"}), b = Input({3}, {.name = "in_b"});
  layers::Dense shared{2, {.name = "shared"}};
  layers::Dense head{1, {.name = "head"}};
  Model model;
  std::vector<double> K = {1, -1, 0.5, 2, -2, 0.25}, c = {0.5, -0.5}, W = {3, -1}, d = {0.125};

  TwoByTwo() : model(build()) {
    shared.set_weights({t(K, {3, 2}), t(c, {2})});
    head.set_weights({t(W, {2, 1}), t(d, {1})});
  }
  Model build() {
    const KerasTensor ha = shared(a), hb = shared(b);
    const KerasTensor s = layers::Add({.name = "sum"})({ha, hb});
    const KerasTensor out1 = head(s);
    const KerasTensor out2 = layers::Concatenate(-1, {.name = "cat"})({ha, b});
    return Model({a, b}, {out1, out2}, {.name = "two_by_two"});
  }
  std::vector<double> h(const std::vector<double>& x, int r) const {
    std::vector<double> out(2);
    for (int j = 0; j < 2; ++j) {
      out[j] = c[j];
      for (int i = 0; i < 3; ++i) out[j] += x[r * 3 + i] * K[i * 2 + j];
    }
    return out;
  }
};

TEST(ModelTest, TwoInputsTwoOutputsAndASharedLayer) {
  TwoByTwo g;
  const std::vector<double> av = {1, 2, 3, -1, 0, 1}, bv = {0.5, 0.5, -2, 4, 1, 0};
  const std::vector<Tensor> out = g.model({t(av, {2, 3}), t(bv, {2, 3})});
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> want1, want2;
  for (int r = 0; r < 2; ++r) {
    const auto ha = g.h(av, r), hb = g.h(bv, r);
    want1.push_back(g.d[0] + (ha[0] + hb[0]) * g.W[0] + (ha[1] + hb[1]) * g.W[1]);
    want2.insert(want2.end(), {ha[0], ha[1], bv[r * 3], bv[r * 3 + 1], bv[r * 3 + 2]});
  }
  EXPECT_TRUE(all_close(out[0], t(want1, {2, 1}), {1e-6, 1e-6}));
  EXPECT_TRUE(all_close(out[1], t(want2, {2, 5}), {1e-6, 1e-6}));

  // The shared layer's variables appear once; its kernel gradient sums both uses:
  // d sum(out1) / dK[i][j] = sum_r (a[r][i] + b[r][i]) * W[j].
  const auto vars = g.model.trainable_variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_TRUE(vars[0].same(g.shared.kernel()));
  const Tensor gk = grad(sum(g.model({t(av, {2, 3}), t(bv, {2, 3})})[0]), {g.shared.kernel()})[0];
  std::vector<double> want_gk;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) want_gk.push_back((av[i] + av[3 + i] + bv[i] + bv[3 + i]) * g.W[j]);
  }
  EXPECT_TRUE(all_close(gk, t(want_gk, {3, 2}), {1e-6, 1e-6}));

  std::vector<std::string> names;
  for (const auto& l : g.model.layers()) names.push_back(l.name());
  EXPECT_EQ(names, (std::vector<std::string>{"in_a", "in_b", "shared", "sum", "head", "cat"}));
  EXPECT_EQ(g.model.outputs()[1].shape(), (PartialShape{-1, 5}));
  EXPECT_EQ(g.model.get_layer(2).name(), "shared");
}

TEST(ModelTest, SingleTensorCallOfAMultiOutputModelIsAnError) {
  TwoByTwo g;
  expect_error<ValueError>([&] { g.model(ones({1, 3})); }, {"two_by_two", "takes 2 inputs"});
  Model one_in_two_out(g.a, std::vector{layers::Dense(2)(g.a), layers::Dense(3)(g.a)});
  expect_error<ValueError>([&] { one_in_two_out(ones({1, 3})); }, {"2 outputs", "vector"});
  EXPECT_EQ(one_in_two_out(std::vector{ones({1, 3})}).size(), 2u);
}

TEST(ModelTest, ModelsNestAsLayers) {
  const KerasTensor in = Input({4});
  layers::Dense inner_dense(3, {.activation = "relu"});
  Model inner(in, inner_dense(in), {.name = "inner"});
  const KerasTensor x = Input({4});
  layers::Dense outer_dense(2);
  const KerasTensor y = outer_dense(inner(x));
  EXPECT_EQ(y.shape(), (PartialShape{-1, 2}));
  Model outer(x, y, {.name = "outer"});
  const auto ls = outer.layers();
  ASSERT_EQ(ls.size(), 3u);
  EXPECT_EQ(ls[1].name(), "inner");
  EXPECT_EQ(ls[1].class_name(), "Functional");
  EXPECT_EQ(outer.variables().size(), 4u);
  EXPECT_EQ(Model(outer.get_layer("inner")).layers().size(), 2u);
  const Tensor data = random_normal({5, 4});
  EXPECT_TRUE(all_close(outer(data), outer_dense(inner_dense(data)), {0, 0}));
  // Called on a symbolic tensor with a known batch, the inferred shape follows it.
  EXPECT_EQ(inner(Input({4}, {.batch_size = 8})).shape(), (PartialShape{8, 3}));
  expect_error<ShapeError>([&] { inner(Input({5})); }, {"inner", "(None, 4)", "(None, 5)"});
}

TEST(ModelTest, OutputNotReachableFromTheInputsIsAClearError) {
  const KerasTensor a = Input({2}, {.name = "reach_a"}), b = Input({2}, {.name = "reach_b"});
  const KerasTensor s = layers::Add()({a, b});
  expect_error<ValueError>([&] { Model(a, s); }, {"reach_b", "not among the model's inputs"});
  expect_error<ValueError>([&] { Model(a, b); }, {"reach_b", "not among the model's inputs"});
  const KerasTensor h = layers::Dense(2, {.name = "not_an_input"})(a);
  expect_error<ValueError>([&] { Model(h, layers::Dense(1)(h)); }, {"not_an_input", "mp::Input"});
  expect_error<ValueError>([&] { Model(std::vector{a, a}, s); }, {"given twice"});
}

TEST(ModelTest, LayerNamesMustBeUnique) {
  const KerasTensor a = Input({2});
  const KerasTensor y = layers::Dense(2, {.name = "twin"})(layers::Dense(2, {.name = "twin"})(a));
  expect_error<ValueError>([&] { Model(a, y); }, {"'twin'", "unique"});
}

TEST(ModelTest, EagerInputsAreCheckedAndStandardized) {
  const KerasTensor in = Input({4}, {.name = "feat"});
  Model m(in, layers::Dense(2)(in), {.name = "checked"});
  expect_error<ShapeError>([&] { m(ones({3, 5})); }, {"checked", "feat", "(None, 4)", "(3, 5)"});
  expect_error<ShapeError>([&] { m(ones({4})); }, {"feat", "(4,)"});
  EXPECT_EQ(m(ones({3, 4}, {.dtype = kFloat64})).dtype(), kFloat32);  // converted at the input
  const KerasTensor ids = Input({4}, {.dtype = kInt32, .name = "ids"});
  Model int_model(ids, layers::Activation("linear")(ids));
  expect_error<DTypeError>([&] { int_model(ones({1, 4})); }, {"ids", "int32", "float32"});
  EXPECT_EQ(int_model(from_vector(std::vector<std::int64_t>{1, 2, 3, 4}, {1, 4})).dtype(), kInt32);
}

TEST(ModelTest, TrainingFlagReachesInnerLayers) {
  const KerasTensor in = Input({1000});
  Model m(in, layers::Dropout(0.5, {.seed = 2})(in));
  const Tensor x = ones({1, 1000});
  EXPECT_EQ(m(x).to_vector<double>(), x.to_vector<double>());
  const auto y = m(x, {.training = true}).to_vector<double>();
  int zeros_seen = 0;
  for (double v : y) zeros_seen += v == 0;
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
}

TEST(ModelTest, FreezingTheModelFreezesEveryLayer) {
  TwoByTwo g;
  g.model.set_trainable(false);
  EXPECT_TRUE(g.model.trainable_variables().empty());
  EXPECT_EQ(g.model.non_trainable_variables().size(), 4u);
  EXPECT_FALSE(g.shared.trainable());
  EXPECT_FALSE(g.shared.kernel().requires_grad());
  g.model.set_trainable(true);
  EXPECT_EQ(g.model.trainable_variables().size(), 4u);
  g.head.set_trainable(false);  // one layer frozen
  EXPECT_EQ(g.model.trainable_variables().size(), 2u);
  EXPECT_EQ(g.model.non_trainable_variables().size(), 2u);
  EXPECT_EQ(g.model.count_params(), 3 * 2 + 2 + 2 + 1);
}

TEST(ModelTest, AModelBuiltFrozenFreezesItsLayers) {
  const KerasTensor in = Input({3});
  layers::Dense dense(2);
  const Model frozen(in, dense(in), {.trainable = false});
  EXPECT_FALSE(frozen.trainable());
  EXPECT_FALSE(dense.trainable());
  EXPECT_TRUE(frozen.trainable_variables().empty());
  EXPECT_EQ(frozen.non_trainable_variables().size(), 2u);
  EXPECT_FALSE(dense.kernel().requires_grad());
}

TEST(ModelTest, WeightsRoundTripRestoresTheInitialModel) {
  set_seed(3);
  const KerasTensor in = Input({6});
  const KerasTensor h = layers::Dense(5, {.activation = "tanh"})(in);
  Model m(in, layers::Dense(2)(h));
  const Tensor x = random_normal({4, 6});
  const std::vector<double> before = m(x).to_vector<double>();
  const std::vector<Tensor> initial = m.get_weights();
  ASSERT_EQ(initial.size(), 4u);
  EXPECT_EQ(initial[0].shape(), (Shape{6, 5}));
  EXPECT_EQ(initial[3].shape(), (Shape{2}));
  std::vector<Tensor> changed;
  for (const Tensor& w : initial) changed.push_back(full_like(w, 0.5));
  m.set_weights(changed);
  EXPECT_NE(m(x).to_vector<double>(), before);
  m.set_weights(initial);
  EXPECT_EQ(m(x).to_vector<double>(), before);

  // The same seed rebuilds the same initial weights.
  set_seed(3);
  const KerasTensor in2 = Input({6});
  Model m2(in2, layers::Dense(2)(layers::Dense(5, {.activation = "tanh"})(in2)));
  const auto w2 = m2.get_weights();
  for (std::size_t i = 0; i < w2.size(); ++i) {
    EXPECT_EQ(w2[i].to_vector<double>(), initial[i].to_vector<double>()) << i;
  }
}

TEST(ModelTest, SetWeightsErrorsNameTheWeightAndShapes) {
  const KerasTensor in = Input({3});
  Model m(in, layers::Dense(2, {.name = "w_check"})(in), {.name = "wm"});
  expect_error<ValueError>(
      [&] {
        m.set_weights({ones({3, 2})});
      },
      {"wm", "expected 2 weights", "got 1"});
  expect_error<ShapeError>(
      [&] {
        m.set_weights({ones({2, 3}), ones({2})});
      },
      {"w_check/kernel", "(3, 2)", "(2, 3)"});
}

TEST(ModelTest, GetLayerErrorsListTheLayers) {
  TwoByTwo g;
  expect_error<ValueError>([&] { g.model.get_layer("nope"); }, {"nope", "shared", "head", "cat"});
  expect_error<ValueError>([&] { g.model.get_layer(17); }, {"17", "6 layers"});
}

TEST(ModelTest, MixedModelGradientsReachFloat32VariablesInFloat32) {
  PolicyGuard guard("mixed_float16");
  const KerasTensor in = Input({8});
  const KerasTensor h = layers::Dense(16, {.activation = "relu"})(in);
  const KerasTensor out = layers::Activation("linear", {.dtype = "float32"})(layers::Dense(4)(h));
  Model m(in, out);
  const Tensor y = m(random_normal({3, 8}), {.training = true});
  EXPECT_EQ(y.dtype(), kFloat32);
  const auto grads = grad(sum(y * y), m.trainable_variables());
  ASSERT_EQ(grads.size(), 4u);
  for (const Tensor& g : grads) {
    EXPECT_EQ(g.dtype(), kFloat32);
    EXPECT_TRUE(all_finite(g));
  }
}

}  // namespace
}  // namespace mixprec
