// Add, Multiply and Concatenate: values, broadcasting, symbolic shapes, mixed-dtype inputs (all
// cast to the compute dtype) and shape errors naming the layer and both shapes.
#include "mixprec/layers/merge.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;

using testing::PolicyGuard;

using testing::expect_error;

Tensor t(const std::vector<double>& v, const Shape& s, DType d = kFloat32) {
  return from_vector(v, s, {.dtype = d});
}

TEST(MergeTest, AddAndMultiplyThreeInputs) {
  const Tensor a = t({1, 2, 3, 4}, {2, 2}), b = t({10, 20, 30, 40}, {2, 2}),
               c = t({-1, 0.5, 2, 0}, {2, 2});
  EXPECT_EQ(layers::Add()({a, b, c})[0].to_vector<double>(),
            (std::vector<double>{10, 22.5, 35, 44}));
  EXPECT_EQ(layers::Multiply()({a, b, c})[0].to_vector<double>(),
            (std::vector<double>{-10, 20, 180, 0}));
}

TEST(MergeTest, ElementwiseMergesBroadcast) {
  const Tensor a = t({1, 2, 3, 4, 5, 6}, {2, 3}), row = t({10, 20, 30}, {1, 3});
  EXPECT_EQ(layers::Add()({a, row})[0].to_vector<double>(),
            (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(layers::Add()({Input({3, 1}), Input({3, 4})}).shape(), (PartialShape{-1, 3, 4}));
  EXPECT_EQ(layers::Multiply()({Input({4}), Input({4})}).shape(), (PartialShape{-1, 4}));
}

TEST(MergeTest, GradientsReachEveryInput) {
  Tensor a = t({1, 2}, {1, 2}), b = t({3, 4}, {1, 2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const auto g = grad(sum(layers::Multiply()({a, b})[0]), {a, b});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(MergeTest, ConcatenateAlongLastAndMiddleAxes) {
  const Tensor a = t({1, 2, 3, 4}, {2, 2}), b = t({5, 6, 7, 8, 9, 10}, {2, 3});
  const Tensor y = layers::Concatenate()({a, b})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 5, 6, 7, 3, 4, 8, 9, 10}));
  const Tensor y1 = layers::Concatenate(1)({t({1, 2}, {1, 1, 2}), t({3, 4, 5, 6}, {1, 2, 2})})[0];
  EXPECT_EQ(y1.shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(y1.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(layers::Concatenate()({Input({3}), Input({4}), Input({5})}).shape(),
            (PartialShape{-1, 12}));
  EXPECT_EQ(layers::Concatenate(1)({Input({2, 7}), Input({-1, 7})}).shape(),
            (PartialShape{-1, -1, 7}));
  EXPECT_EQ(layers::Concatenate(1).axis(), 1);
}

TEST(MergeTest, MixedDtypeInputsAreCastToTheComputeDtype) {
  PolicyGuard guard("mixed_float16");
  const Tensor y =
      layers::Concatenate()({t({1, 2}, {1, 2}, kFloat32), t({3}, {1, 1}, kFloat16)})[0];
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(
      layers::Add()({Input({2}, {.dtype = kFloat16}), Input({2}, {.dtype = kFloat64})}).dtype(),
      kFloat16);
}

TEST(MergeTest, ShapeMismatchNamesTheLayerAndBothShapes) {
  expect_error<ShapeError>(
      [] {
        layers::Add({.name = "sum"})({Input({4}), Input({5})});
      },
      {"sum", "(None, 4)", "(None, 5)"});
  expect_error<ShapeError>(
      [] {
        layers::Multiply({.name = "prod"})({zeros({2, 3}), zeros({2, 4})});
      },
      {"prod", "(2, 3)", "(2, 4)"});
  expect_error<ShapeError>(
      [] {
        layers::Concatenate(-1, {.name = "cat"})({Input({3, 4}), Input({5, 4})});
      },
      {"cat", "(None, 3, 4)", "(None, 5, 4)"});
  expect_error<ShapeError>(
      [] {
        layers::Concatenate(-1, {.name = "cat2"})({Input({3}), Input({3, 1})});
      },
      {"cat2", "(None, 3)", "(None, 3, 1)"});
  expect_error<ShapeError>([] { layers::Concatenate(4)({Input({3}), Input({3})}); }, {"axis 4"});
}

TEST(MergeTest, NeedAtLeastTwoInputs) {
  expect_error<ValueError>([] { layers::Concatenate()({ones({1, 2})}); }, {"at least 2", "got 1"});
}

}  // namespace
}  // namespace mixprec
