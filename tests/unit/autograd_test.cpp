// The autograd engine, grad(), GradientTape and NoGradScope. Expected gradients are worked out by
// hand in each test (in double) from the calculus of the small graph it builds.
#include "mixprec/autograd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;

Tensor vec(const std::vector<double>& values, DType dtype = kFloat64) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}, {.dtype = dtype});
}

Tensor variable(const std::vector<double>& values, DType dtype = kFloat64) {
  Tensor t = vec(values, dtype);
  t.set_requires_grad(true);
  return t;
}

constexpr testing::Tolerance kExact{0.0, 0.0};
constexpr testing::Tolerance kF64{1e-12, 1e-12};

TEST(AutogradTest, LeavesAndRecordedOutputs) {
  Tensor x = variable({1, 2});
  const Tensor c = vec({3, 4});
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_FALSE(x.grad().defined());
  const Tensor y = x * c;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "mulBackward");
  const Tensor z = c * c;  // no input requires a gradient: nothing recorded
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
  const Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.data_ptr(), y.data_ptr());
}

TEST(AutogradTest, BackwardAccumulatesAcrossCalls) {
  Tensor x = variable({1, 2, 3});
  // f = sum(x^2 * 3): df/dx = 6x.
  sum(x * x * 3.0).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({6, 12, 18}), kExact));
  sum(x * x * 3.0).backward();  // a second graph: gradients add up
  EXPECT_TRUE(all_close(x.grad(), vec({12, 24, 36}), kExact));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  sum(x).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({1, 1, 1}), kExact));
}

TEST(AutogradTest, RetainGraphAllowsASecondBackward) {
  Tensor x = variable({2, -1});
  const Tensor loss = sum(exp(x) * x);  // d/dx = e^x (1 + x)
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  const Tensor expected = vec({2 * std::exp(2.0) * 3.0, 2 * std::exp(-1.0) * 0.0});
  EXPECT_TRUE(all_close(x.grad(), expected, kF64));
}

TEST(AutogradTest, TensorUsedTwiceGetsSummedGradients) {
  Tensor x = variable({0.5, -1.5});
  // y = x * x + x: dy/dx = 2x + 1, every use contributes.
  sum(x * x + x).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({2.0, -2.0}), kExact));
  Tensor w = variable({3});
  sum(w + w + w).backward();
  EXPECT_TRUE(all_close(w.grad(), vec({3}), kExact));
}

TEST(AutogradTest, DiamondGraph) {
  // a -> (b = exp(a), c = a * 2) -> d = b * c -> sum. d = 2 a e^a, dd/da = 2 e^a (1 + a).
  Tensor a = variable({0.0, 1.0, -2.0});
  const Tensor b = exp(a);
  const Tensor c = a * 2.0;
  const Tensor d = b * c;
  sum(d).backward();
  std::vector<double> expected;
  for (double v : {0.0, 1.0, -2.0}) expected.push_back(2 * std::exp(v) * (1 + v));
  EXPECT_TRUE(all_close(a.grad(), vec(expected), kF64));
}

TEST(AutogradTest, DeepDiamondReusesIntermediates) {
  // Each level doubles the number of paths: h_{k+1} = h_k * h_k' with both factors from h_k, so
  // h_n = x^(2^n) and dh/dx = 2^n x^(2^n - 1). Wrong ordering or a node run twice shows up here.
  Tensor x = variable({1.1});
  Tensor h = x;
  for (int k = 0; k < 4; ++k) h = mul(h, h);  // x^16
  h.backward();
  EXPECT_NEAR(x.grad().item(), 16 * std::pow(1.1, 15), 1e-9);
}

TEST(AutogradTest, NonScalarBackwardNeedsAGradient) {
  Tensor x = variable({1, 2});
  const Tensor y = x * 3.0;
  EXPECT_THROW(y.backward(), AutogradError);
  try {
    y.backward();
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("(2,)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(y.backward(vec({1, 2, 3})), AutogradError);         // wrong shape
  EXPECT_THROW(y.backward(vec({1, 2}, kFloat32)), AutogradError);  // wrong dtype
  y.backward(vec({10, -1}));
  EXPECT_TRUE(all_close(x.grad(), vec({30, -3}), kExact));
}

TEST(AutogradTest, BackwardOnATensorWithoutHistoryThrows) {
  const Tensor c = vec({1});
  EXPECT_THROW(c.backward(), AutogradError);
  EXPECT_THROW(grad(c, {c}), AutogradError);
}

TEST(AutogradTest, SetRequiresGradChecks) {
  Tensor x = variable({1, 2});
  Tensor y = x * 2.0;
  EXPECT_THROW(y.set_requires_grad(true), AutogradError);
  EXPECT_THROW(y.set_requires_grad(false), AutogradError);
  Tensor i = from_vector(std::vector<std::int32_t>{1, 2}, {2});
  EXPECT_THROW(i.set_requires_grad(true), DTypeError);
  Tensor b = ones({2}, {.dtype = kBool});
  EXPECT_THROW(b.set_requires_grad(true), DTypeError);
  EXPECT_THROW(ones({2}, {.dtype = kInt64, .requires_grad = true}), DTypeError);
  EXPECT_NO_THROW(i.set_requires_grad(false));
  Tensor h = ones({2}, {.dtype = kFloat16});
  EXPECT_NO_THROW(h.set_requires_grad(true));
  // Unmarking a variable stops recording.
  x.set_requires_grad(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
}

TEST(AutogradTest, SetGradChecksGeometry) {
  Tensor x = variable({1, 2});
  x.set_grad(vec({5, 6}));
  EXPECT_TRUE(all_close(x.grad(), vec({5, 6}), kExact));
  sum(x).backward();
  EXPECT_TRUE(all_close(x.grad(), vec({6, 7}), kExact));
  EXPECT_THROW(x.set_grad(vec({1, 2, 3})), ValueError);
  EXPECT_THROW(x.set_grad(vec({1, 2}, kFloat32)), ValueError);
}

TEST(AutogradTest, AccumulatedGradientsDoNotAliasOtherTensors) {
  // add's backward hands the same gradient tensor to both operands; each .grad must be its own
  // tensor so that an in-place update of one (unscaling, clipping) cannot change the other.
  Tensor a = variable({1, 2});
  Tensor b = variable({3, 4});
  const Tensor seed = vec({1, 1});
  (a + b).backward(seed);
  EXPECT_NE(a.grad().data_ptr(), b.grad().data_ptr());
  EXPECT_NE(a.grad().data_ptr(), seed.data_ptr());
  a.grad().data<double>()[0] = 100.0;
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(seed.to_vector<double>(), (std::vector<double>{1, 1}));

  // Same for grad(): two sources fed by one gradient tensor get distinct tensors.
  Tensor c = variable({1, 2});
  Tensor d = variable({3, 4});
  const auto g = grad(sum(c + d), {c, d});
  EXPECT_NE(g[0].data_ptr(), g[1].data_ptr());
}

TEST(AutogradTest, GradDoesNotTouchAccumulatedGradients) {
  Tensor x = variable({1, 2});
  Tensor y = variable({3, 4});
  x.set_grad(vec({-7, -7}));
  const Tensor f = sum(x * y);
  const auto g = grad(f, {x, y});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(all_close(g[0], vec({3, 4}), kExact));
  EXPECT_TRUE(all_close(g[1], vec({1, 2}), kExact));
  EXPECT_TRUE(all_close(x.grad(), vec({-7, -7}), kExact));
  EXPECT_FALSE(y.grad().defined());
}

TEST(AutogradTest, GradOfUnusedInputIsZero) {
  Tensor x = variable({1, 2});
  Tensor unused = variable({5, 6, 7});
  Tensor constant = vec({1});  // not even requiring a gradient
  const auto g = grad(sum(x * x), {x, unused, constant});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_TRUE(all_close(g[0], vec({2, 4}), kExact));
  EXPECT_TRUE(all_close(g[1], vec({0, 0, 0}), kExact));
  EXPECT_EQ(g[1].shape(), Shape({3}));
  EXPECT_EQ(g[1].dtype(), kFloat64);
  EXPECT_TRUE(all_close(g[2], vec({0}), kExact));
}

TEST(AutogradTest, GradWithRespectToAnIntermediate) {
  Tensor x = variable({1, 2});
  const Tensor h = x * 3.0;     // dh/dx = 3
  const Tensor f = sum(h * h);  // df/dh = 2h = 6x
  const auto g = grad(f, {h, x});
  EXPECT_TRUE(all_close(g[0], vec({6, 12}), kExact));
  EXPECT_TRUE(all_close(g[1], vec({18, 36}), kExact));
}

TEST(AutogradTest, GradWithAnOutputGradient) {
  Tensor x = variable({1, 2, 3});
  const Tensor y = x * x;
  const auto g = grad(y, {x}, vec({1, 0, -1}));
  EXPECT_TRUE(all_close(g[0], vec({2, 0, -6}), kExact));
  EXPECT_THROW(grad(x * x, {x}), AutogradError);  // non-scalar without a gradient
}

TEST(AutogradTest, DetachStopsGradients) {
  Tensor x = variable({2});
  // f = x * detach(x): only the first factor is differentiated, df/dx = detach(x) = 2.
  const auto g = grad(x * x.detach(), {x});
  EXPECT_TRUE(all_close(g[0], vec({2}), kExact));
}

TEST(AutogradTest, NoGradScopeStopsRecording) {
  Tensor x = variable({1, 2});
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradScope no_grad;
    EXPECT_FALSE(is_grad_enabled());
    const Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_THROW(sum(y).backward(), AutogradError);
    {
      NoGradScope nested;
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());  // the inner scope restores the outer state
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(AutogradTest, GradientTapeNonPersistentIsSingleUse) {
  Tensor x = variable({1, 2});
  GradientTape tape;
  const Tensor loss = sum(x * x * x);  // 3x^2
  const Tensor g = tape.gradient(loss, x);
  EXPECT_TRUE(all_close(g, vec({3, 12}), kExact));
  EXPECT_FALSE(x.grad().defined());  // the tape does not accumulate
  EXPECT_THROW(tape.gradient(loss, x), AutogradError);
}

TEST(AutogradTest, GradientTapePersistentCanBeReused) {
  Tensor x = variable({1, 2});
  Tensor y = variable({-1, 0.5});
  GradientTape tape({.persistent = true});
  const Tensor loss = sum(x * x * y);
  const auto first = tape.gradient(loss, std::vector<Tensor>{x, y});
  const auto second = tape.gradient(loss, std::vector<Tensor>{y, x});
  EXPECT_TRUE(all_close(first[0], vec({-2, 2}), kExact));  // 2 x y
  EXPECT_TRUE(all_close(first[1], vec({1, 4}), kExact));   // x^2
  EXPECT_TRUE(all_close(second[0], first[1], kExact));
  EXPECT_TRUE(all_close(second[1], first[0], kExact));
  const Tensor third = tape.gradient(loss, x);
  EXPECT_TRUE(all_close(third, first[0], kExact));
}

TEST(AutogradTest, GradientTapeWatch) {
  Tensor x = vec({3, -1});  // a plain tensor
  GradientTape tape;
  tape.watch(x);
  EXPECT_TRUE(x.requires_grad());
  const Tensor g = tape.gradient(sum(relu(x) * 5.0), x);
  EXPECT_TRUE(all_close(g, vec({5, 0}), kExact));
  Tensor i = from_vector(std::vector<std::int32_t>{1}, {1});
  GradientTape tape2;
  EXPECT_THROW(tape2.watch(i), DTypeError);
}

TEST(AutogradTest, MasterWeightGetsFloat32GradientThroughFloat16Compute) {
  // The mixed-precision path: a float32 variable is cast to float16 for compute; its gradient
  // arrives as float32. f = sum(w16 * x16) * 4 so df/dw = 4 x (x chosen exactly representable).
  Tensor w = variable({0.5, -1.25, 3.0}, kFloat32);
  const Tensor x = vec({1.5, 2.0, -0.75}, kFloat16);
  const Tensor w16 = w.to(kFloat16);
  EXPECT_EQ(w16.dtype(), kFloat16);
  EXPECT_TRUE(w16.requires_grad());
  const Tensor loss = sum(w16 * x) * 4.0;
  EXPECT_EQ(loss.dtype(), kFloat16);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_TRUE(all_close(w.grad(), vec({6.0, 8.0, -3.0}), kExact));

  // Through GradientTape and a float32 island (cast back up before the loss).
  Tensor v = variable({0.1, 0.2}, kFloat32);
  GradientTape tape;
  const Tensor h = exp(v.to(kBFloat16)).to(kFloat32);
  const Tensor g = tape.gradient(sum(h), v);
  EXPECT_EQ(g.dtype(), kFloat32);
  // d/dv exp(v) = exp(v), computed on bfloat16-rounded values: within bfloat16 tolerance.
  EXPECT_TRUE(all_close(g, vec({std::exp(0.1), std::exp(0.2)}), {1.6e-2, 1e-5}));
}

TEST(AutogradTest, IntegerCastIsNotDifferentiable) {
  Tensor x = variable({1.7, -2.2});
  const Tensor i = x.to(kInt32);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(i.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, -2}));
}

TEST(AutogradTest, GraphIsFreedWithItsOutput) {
  // A node holds no strong reference to the leaf it accumulates into: dropping the variable
  // while a graph is alive must not crash backward, and the leaf's memory goes away.
  const std::int64_t before = memory_stats().current_bytes;
  Tensor loss;
  {
    Tensor w = variable({1, 2, 3});
    loss = sum(w * 2.0);
  }
  EXPECT_NO_THROW(loss.backward());
  loss = Tensor();
  EXPECT_EQ(memory_stats().current_bytes, before);
}

}  // namespace
}  // namespace mixprec

// A second backward through a graph whose saved tensors were freed is refused with an
// AutogradError that says how to keep the graph; with retain_graph it works.
TEST(AutogradReleaseTest, SecondBackwardThroughAFreedGraphIsAClearError) {
  auto x = mixprec::full({3}, 2.0, {.requires_grad = true});
  auto y = mixprec::sum(x * x);
  y.backward();
  try {
    y.backward();
    ADD_FAILURE() << "expected an AutogradError";
  } catch (const mixprec::AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
  auto z = mixprec::sum(x * x);
  x.zero_grad();
  z.backward(mixprec::Tensor(), /*retain_graph=*/true);
  z.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{8.0f, 8.0f, 8.0f}));  // 2 * 2x
}
