// Flatten and Reshape: values keep their row-major order, shapes are inferred symbolically
// (including -1 targets and unknown extents), and bad targets name the layer and both shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/reshape.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec {
namespace {

using testing::expect_error;

std::vector<double> iota(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(FlattenReshapeTest, FlattenKeepsRowMajorOrder) {
  const Tensor x = from_vector(iota(24), {2, 3, 4});
  const Tensor y = layers::Flatten()(x.transpose(1, 2));  // a non-contiguous view
  ASSERT_EQ(y.shape(), (Shape{2, 12}));
  // Row-major order of the transposed view: x[b][k][j] for j, then k.
  std::vector<double> want;
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(b * 12 + k * 4 + j);
  EXPECT_EQ(y.to_vector<double>(), want);
  EXPECT_EQ(layers::Flatten()(from_vector(iota(3), {3})).shape(), (Shape{3, 1}));
}

TEST(FlattenReshapeTest, FlattenInfersShapes) {
  EXPECT_EQ(layers::Flatten()(Input({28, 28})).shape(), (PartialShape{-1, 784}));
  EXPECT_EQ(layers::Flatten()(Input({-1, 3})).shape(), (PartialShape{-1, -1}));
  EXPECT_EQ(layers::Flatten()(Input({5}, {.batch_size = 4})).shape(), (PartialShape{4, 5}));
  expect_error<ShapeError>([] { layers::Flatten({.name = "fl"})(scalar(1.0)); }, {"fl", "()"});
}

TEST(FlattenReshapeTest, ReshapeWithAndWithoutInference) {
  const Tensor x = from_vector(iota(24), {2, 12});
  const Tensor y = layers::Reshape({3, 4})(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(y.to_vector<double>(), iota(24));
  EXPECT_EQ(layers::Reshape({-1, 2})(x).shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(layers::Reshape({28, 28, 1})(Input({784})).shape(), (PartialShape{-1, 28, 28, 1}));
  EXPECT_EQ(layers::Reshape({-1, 7})(Input({784})).shape(), (PartialShape{-1, 112, 7}));
  EXPECT_EQ(layers::Reshape({-1, 7})(Input({-1})).shape(), (PartialShape{-1, -1, 7}));
  EXPECT_EQ(layers::Reshape({2, -1}).target_shape(), (std::vector<std::int64_t>{2, -1}));
}

TEST(FlattenReshapeTest, ReshapeMismatchNamesTheLayerAndBothShapes) {
  expect_error<ShapeError>(
      [] {
        layers::Reshape({28, 27}, {.name = "rs"})(Input({784}));
      },
      {"rs", "(None, 784)", "(None, 28, 27)"});
  expect_error<ShapeError>(
      [] {
        layers::Reshape({-1, 5}, {.name = "rs5"})(zeros({2, 12}));
      },
      {"rs5", "(2, 12)", "(2, -1, 5)"});
  expect_error<ValueError>([] { layers::Reshape({-1, -1}); }, {"more than one -1"});
  expect_error<ValueError>([] { layers::Reshape({3, -2}); }, {"negative"});
}

TEST(FlattenReshapeTest, GradientsPassThrough) {
  Tensor x = from_vector(iota(6), {1, 2, 3});
  x.set_requires_grad(true);
  const Tensor y = layers::Reshape({3, 2})(layers::Flatten()(x));
  const Tensor w = from_vector(iota(6), {1, 3, 2});
  const Tensor g = grad(sum(y * w), {x})[0];
  EXPECT_EQ(g.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(g.to_vector<double>(), iota(6));  // same row-major positions
}

}  // namespace
}  // namespace mixprec
