// ClassToken and Cropping1D (the ViT's class-token pooling): shapes and dtypes under float32 and
// the mixed policies, the token's gradient (the sum over the batch of row 0's), Cropping1D's
// values and zero gradient on the cropped rows, config round trips, and the errors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using layers::ClassToken;
using layers::Cropping1D;
using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

Tensor ramp(const Shape& shape, double scale = 0.1) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(scale * (i % 17) - 0.5);
  return from_vector(v, shape);
}

class ClassTokenPolicies : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassTokenPolicies, PrependsTheTokenInTheComputeDtype) {
  PolicyGuard guard(GetParam());
  const DType compute = mixed_precision::Policy(GetParam()).compute_dtype();
  ClassToken layer({.initializer = "random_normal"});
  const Tensor x = ramp(Shape{3, 5, 4}).to(compute);
  const Tensor y = layer(x);
  EXPECT_EQ(y.shape(), (Shape{3, 6, 4}));
  EXPECT_EQ(y.dtype(), compute);
  EXPECT_EQ(layer.token().dtype(), DType::float32);
  EXPECT_EQ(layer.token().shape(), (Shape{4}));
  const Tensor token = layer.token().to(compute).reshape(Shape{1, 4});
  for (std::int64_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(
        all_close(slice(slice(y, 0, b, b + 1), 1, 0, 1).reshape(Shape{1, 4}), token, {0.0, 0.0}))
        << b;
  }
  EXPECT_TRUE(all_close(slice(y, 1, 1, 6), x, {0.0, 0.0}));
}

INSTANTIATE_TEST_SUITE_P(Policies, ClassTokenPolicies,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"));

TEST(ClassTokenLayer, GradientsReachTheTokenAndTheInput) {
  PolicyGuard guard("float64");
  ClassToken layer({.initializer = "random_normal"});
  Tensor x = ramp(Shape{2, 3, 4}).to(DType::float64);
  x.set_requires_grad(true);
  const Tensor w = ramp(Shape{2, 4, 4}, 0.37).to(DType::float64);
  sum(mul(layer(x), w)).backward();
  // d/dtoken = sum over the batch of w[:, 0, :]; d/dx = w[:, 1:, :].
  EXPECT_TRUE(all_close(layer.token().grad(), sum(slice(w, 1, 0, 1), {0, 1}), {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(x.grad(), slice(w, 1, 1, 4), {0.0, 0.0}));
}

TEST(Cropping1DLayer, CropsAxisOneAndItsGradient) {
  PolicyGuard guard("float64");
  Cropping1D crop({1, 2});
  Tensor x = ramp(Shape{2, 6, 3}).to(DType::float64);
  x.set_requires_grad(true);
  const Tensor y = crop(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(all_close(y, slice(x.detach(), 1, 1, 4), {0.0, 0.0}));
  EXPECT_TRUE(
      testing::gradcheck([&](const std::vector<Tensor>& in) { return crop(in[0]); }, {x.detach()}));
  // Symbolic shapes: the cropped axis shrinks, an unknown one stays unknown.
  EXPECT_EQ(Cropping1D({0, 5})(Input({6, 3})).shape(), (PartialShape{-1, 1, 3}));
  EXPECT_EQ(Cropping1D({0, 5})(Input({-1, 3})).shape(), (PartialShape{-1, -1, 3}));
}

TEST(ClassTokenLayer, ConfigsRoundTrip) {
  PolicyGuard guard("mixed_bfloat16");
  auto in = Input({4, 8});
  auto h = ClassToken({.name = "cls"})(in);
  h = Cropping1D({0, 4}, {.name = "first"})(h);
  Model m(in, layers::Flatten()(h));
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 8}));
  const std::string json = m.to_json();
  EXPECT_NE(json.find("\"ClassToken\""), std::string::npos);
  EXPECT_NE(json.find("\"cropping\""), std::string::npos);
  EXPECT_EQ(model_from_json(json).to_json(), json);
  std::ostringstream summary;
  m.summary(summary);
  EXPECT_NE(summary.str().find("ClassToken"), std::string::npos);
}

TEST(ClassTokenLayer, Errors) {
  PolicyGuard guard("float32");
  expect_error<ValueError>([] { Cropping1D({-1, 0}); }, {"cropping", ">= 0"});
  expect_error<ShapeError>([] { Cropping1D({2, 2})(Input({4, 3})); }, {"leaves no step"});
  expect_error<ShapeError>([] { Cropping1D({2, 2})(zeros(Shape{1, 3, 2})); }, {"leaves no step"});
  expect_error<ShapeError>([] { Cropping1D()(Input({4})); }, {"(batch, steps, features)"});
  expect_error<ShapeError>([] { ClassToken()(Input({4})); }, {"(batch, tokens, features)"});
  ClassToken built;
  built(zeros(Shape{1, 2, 3}));
  expect_error<ShapeError>([&] { built(zeros(Shape{1, 2, 5})); }, {"3 features"});
  expect_error<ValueError>([] { const ClassToken handle{Cropping1D()}; }, {"not a ClassToken"});
  expect_error<ValueError>([] { ClassToken().token(); }, {"built"});
}

}  // namespace
}  // namespace mixprec
