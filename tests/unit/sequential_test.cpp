// Sequential: built at once from an InputLayer or lazily on the first call, add()/pop() with shape
// checks at add time, values against loops over the weights, and use inside a functional model.
#include "mixprec/models/sequential.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/layers/activation.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/reshape.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

namespace mp = mixprec;
using testing::all_close;

using testing::expect_error;

TEST(SequentialTest, InputLayerFirstBuildsAtOnce) {
  mp::Sequential model({mp::layers::InputLayer({2, 3}), mp::layers::Flatten(),
                        mp::layers::Dense(4, {.activation = "relu"}), mp::layers::Dense(2)},
                       {.name = "seq"});
  EXPECT_TRUE(model.built());
  EXPECT_EQ(model.name(), "seq");
  EXPECT_EQ(model.class_name(), "Sequential");
  EXPECT_EQ(model.layers().size(), 3u);  // the InputLayer is not listed, as in Keras
  EXPECT_EQ(model.variables().size(), 4u);
  EXPECT_EQ(model.inputs()[0].shape(), (PartialShape{-1, 2, 3}));
  EXPECT_EQ(model.outputs()[0].shape(), (PartialShape{-1, 2}));
  EXPECT_EQ(model.count_params(), 6 * 4 + 4 + 4 * 2 + 2);

  // Values against loops over the weights.
  const auto w = model.get_weights();
  const auto k1 = w[0].to_vector<double>(), b1 = w[1].to_vector<double>();
  const auto k2 = w[2].to_vector<double>(), b2 = w[3].to_vector<double>();
  const Tensor x = random_normal({3, 2, 3});
  const auto xv = x.to_vector<double>();
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> h(4);
    for (int j = 0; j < 4; ++j) {
      h[j] = b1[j];
      for (int i = 0; i < 6; ++i) h[j] += xv[r * 6 + i] * k1[i * 4 + j];
      h[j] = std::max(h[j], 0.0);
    }
    for (int j = 0; j < 2; ++j) {
      double y = b2[j];
      for (int i = 0; i < 4; ++i) y += h[i] * k2[i * 2 + j];
      want.push_back(y);
    }
  }
  EXPECT_TRUE(all_close(model(x), from_vector(want, {3, 2}), {1e-5, 1e-6}));
}

TEST(SequentialTest, WithoutInputLayerBuildsOnTheFirstCall) {
  mp::Sequential model({mp::layers::Dense(4), mp::layers::Dense(2)}, {.name = "lazy"});
  EXPECT_FALSE(model.built());
  EXPECT_TRUE(model.variables().empty());
  expect_error<ValueError>([&] { model.inputs(); }, {"lazy", "InputLayer"});
  const Tensor y = model(ones({3, 5}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_TRUE(model.built());
  EXPECT_EQ(model.inputs()[0].shape(), (PartialShape{-1, 5}));  // the batch axis stays open
  EXPECT_EQ(model(ones({7, 5})).shape(), (Shape{7, 2}));
  EXPECT_EQ(mp::layers::Dense(model.layers()[0]).kernel().shape(), (Shape{5, 4}));
  expect_error<ShapeError>([&] { model(ones({3, 6})); }, {"lazy", "(None, 5)", "(3, 6)"});
}

TEST(SequentialTest, AddChecksShapesAndRejectsAMismatchedLayer) {
  mp::Sequential model;
  model.add(mp::layers::InputLayer({4}));
  model.add(mp::layers::Dense(3, {.name = "d3"}));
  expect_error<ShapeError>(
      [&] {
        model.add(mp::layers::Reshape({2, 2}, {.name = "rs4"}));
      },
      {"rs4", "(None, 3)"});
  EXPECT_EQ(model.layers().size(), 1u);  // not added
  model.add(mp::layers::Reshape({3, 1}));
  EXPECT_EQ(model.outputs()[0].shape(), (PartialShape{-1, 3, 1}));
  model.pop();
  EXPECT_EQ(model.outputs()[0].shape(), (PartialShape{-1, 3}));
  model.pop();
  EXPECT_EQ(model.outputs()[0].shape(), (PartialShape{-1, 4}));  // the input alone: identity
  EXPECT_EQ(model(full({2, 4}, 1.5)).to_vector<double>(), std::vector<double>(8, 1.5));
  EXPECT_THROW(model.pop(), ValueError);
}

TEST(SequentialTest, InputLayerOnlyFirst) {
  mp::Sequential model({mp::layers::Dense(2)});
  expect_error<ValueError>([&] { model.add(mp::layers::InputLayer({3}, {.name = "late_in"})); },
                           {"late_in", "first"});
  layers::Layer none;
  EXPECT_THROW(model.add(none), ValueError);
}

TEST(SequentialTest, MultiOutputLayersAreRejected) {
  const KerasTensor in = Input({3});
  Model two(in, std::vector{layers::Dense(2)(in), layers::Dense(2)(in)}, {.name = "two_out"});
  mp::Sequential model({mp::layers::InputLayer({3})});
  expect_error<ValueError>([&] { model.add(two); }, {"two_out", "one output"});
}

TEST(SequentialTest, UsableInsideAFunctionalModel) {
  mp::Sequential block({mp::layers::Dense(4, {.activation = "relu"}), mp::layers::Dense(3)},
                       {.name = "block"});
  const KerasTensor in = Input({5});
  const KerasTensor y = block(in);  // builds the Sequential from the symbolic input
  EXPECT_EQ(y.shape(), (PartialShape{-1, 3}));
  Model m(in, mp::layers::Activation("softmax")(y));
  EXPECT_EQ(m.variables().size(), 4u);
  const Tensor x = random_normal({2, 5});
  EXPECT_TRUE(all_close(m(x), softmax(block(x), -1), {0, 0}));
}

TEST(SequentialTest, FreezeAndTrainingFlag) {
  mp::Sequential model(
      {mp::layers::InputLayer({100}), mp::layers::Dropout(0.5, {.seed = 9}), mp::layers::Dense(2)});
  const Tensor x = ones({1, 100});
  EXPECT_EQ(model(x).to_vector<double>(), model(x).to_vector<double>());
  EXPECT_NE(model(x, {.training = true}).to_vector<double>(),
            model(x, {.training = true}).to_vector<double>());
  model.set_trainable(false);
  EXPECT_TRUE(model.trainable_variables().empty());
  EXPECT_EQ(model.non_trainable_variables().size(), 2u);
}

}  // namespace
}  // namespace mixprec
