// The convolutions of a mixed-precision layer in one op (ops/autocast_conv.h): the values and the
// gradients of the composition conv(x, cast(kernel), cast(bias)) bit for bit, for conv2d (with and
// without bias, with the fused relu6), grouped and depthwise convolutions, bfloat16 and float16,
// inside and outside a RecastScope; the variables' gradients arrive with no cast node in between;
// the 16-bit filters are not kept inside a RecastScope; the composition when the dtypes agree;
// and the Conv2D / DepthwiseConv2D layers under a mixed policy record the one node.
#include "ops/autocast_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_cast.h"
#include "mixprec/mixprec.h"
#include "support/op_test_helpers.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::normal;

enum class Kind { conv, conv_relu6, grouped, depthwise };

struct Case {
  Kind kind;
  bool bias;
  std::string label() const {
    const char* names[] = {"conv2d", "conv2d+relu6", "grouped", "depthwise"};
    return std::string(names[static_cast<int>(kind)]) + (bias ? " with bias" : " without bias");
  }
};

struct Result {
  std::vector<float> y, dx, dw, db;
  std::string node;                  // the output's node
  std::vector<std::string> parents;  // the nodes its gradients go to
};

Shape kernel_shape(Kind kind) {
  switch (kind) {
    case Kind::grouped: return {3, 3, 4, 12};
    case Kind::depthwise: return {3, 3, 8, 2};
    default: return {3, 3, 8, 12};
  }
}

Tensor forward(bool fused, const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  Conv2dOptions options{.padding = Padding::same};
  if (c.kind == Kind::grouped) options.groups = 2;
  const std::optional<UnaryOp> act =
      c.kind == Kind::conv_relu6 ? std::optional<UnaryOp>(UnaryOp::relu6) : std::nullopt;
  if (fused) {
    return c.kind == Kind::depthwise ? ops::autocast_depthwise_conv2d(x, w, b, options)
                                     : ops::autocast_conv2d(x, w, b, options, act);
  }
  const DType d = x.dtype();
  const Tensor w16 = w.to(d), b16 = b.defined() ? b.to(d) : Tensor();
  if (c.kind == Kind::depthwise) return depthwise_conv2d(x, w16, b16, options);
  return act ? relu6(conv2d(x, w16, b16, options)) : conv2d(x, w16, b16, options);
}

// The op (fused) or the composition on the same float32 variables, differentiated against a
// random output gradient, optionally with the forward inside a RecastScope.
Result run(bool fused, const Case& c, DType dtype, bool recast) {
  const Tensor x = normal({2, 5, 5, 8}, 11, dtype).set_requires_grad(true);
  const Tensor w = normal(kernel_shape(c.kind), 12, kFloat32).set_requires_grad(true);
  const std::int64_t out = c.kind == Kind::depthwise ? 16 : 12;
  const Tensor b = c.bias ? normal({out}, 13, kFloat32).set_requires_grad(true) : Tensor();
  Tensor y;
  {
    std::optional<autograd::RecastScope> scope;
    if (recast) scope.emplace();
    y = forward(fused, c, x, w, b);
  }
  Result r;
  r.node = y.grad_fn()->name();
  for (const auto& next : y.grad_fn()->next) r.parents.push_back(next ? next->name() : "none");
  const Tensor dy = normal(y.shape(), 14, dtype);
  std::vector<Tensor> inputs = {x, w};
  if (c.bias) inputs.push_back(b);
  const std::vector<Tensor> g = grad(sum(mul(y, dy).to(kFloat32)), inputs);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_EQ(g[1].dtype(), kFloat32);
  EXPECT_EQ(g[1].shape(), w.shape());
  r.y = y.to_vector<float>();
  r.dx = g[0].to_vector<float>();
  r.dw = g[1].to_vector<float>();
  if (c.bias) {
    EXPECT_EQ(g[2].dtype(), kFloat32);
    r.db = g[2].to_vector<float>();
  }
  return r;
}

const Case kCases[] = {{Kind::conv, true},    {Kind::conv, false},     {Kind::conv_relu6, true},
                       {Kind::grouped, true}, {Kind::depthwise, true}, {Kind::depthwise, false}};

TEST(AutocastConvTest, SameValuesAndGradientsAsTheComposition) {
  for (const DType dtype : {kBFloat16, kFloat16}) {
    for (const Case& c : kCases) {
      for (const bool recast : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + c.label() +
                     (recast ? " in a RecastScope" : ""));
        const Result fused = run(true, c, dtype, recast);
        const Result composed = run(false, c, dtype, recast);
        EXPECT_EQ(fused.y, composed.y);
        EXPECT_EQ(fused.dx, composed.dx);
        EXPECT_EQ(fused.dw, composed.dw);
        EXPECT_EQ(fused.db, composed.db);
      }
    }
  }
}

TEST(AutocastConvTest, TheVariablesGradientsSkipTheCastNodes) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.label());
    const Result fused = run(true, c, kBFloat16, false);
    const Result composed = run(false, c, kBFloat16, false);
    // x is a leaf here too, so every parent of the op's node is a leaf accumulator.
    for (const std::string& parent : fused.parents) EXPECT_EQ(parent, "AccumulateGrad");
    EXPECT_EQ(fused.parents.size(), c.bias ? 3u : 2u);
    // The composition goes through a cast (and, for depthwise filters, a reshape) first; with
    // relu6 its output node is the activation's, whose one parent is the convolution's.
    EXPECT_TRUE(std::any_of(composed.parents.begin(), composed.parents.end(),
                            [](const std::string& p) { return p != "AccumulateGrad"; }));
  }
}

TEST(AutocastConvTest, InsideARecastScopeTheSixteenBitFiltersAreNotKept) {
  const Tensor x = normal({1, 4, 4, 32}, 21, kBFloat16).set_requires_grad(true);
  const Tensor w = normal({3, 3, 32, 64}, 22, kFloat32).set_requires_grad(true);
  for (const bool recast : {false, true}) {
    std::optional<autograd::RecastScope> scope;
    if (recast) scope.emplace();
    const std::int64_t before = memory_stats().current_bytes;
    const Tensor y = ops::autocast_conv2d(x, w, Tensor(), {.padding = Padding::same}, {});
    const std::int64_t kept =
        memory_stats().current_bytes - before - static_cast<std::int64_t>(y.nbytes());
    EXPECT_EQ(kept, recast ? 0 : 3 * 3 * 32 * 64 * 2) << (recast ? "recast" : "kept");
    const Tensor g = grad(sum(y.to(kFloat32)), {w})[0];
    EXPECT_EQ(g.dtype(), kFloat32);
  }
}

TEST(AutocastConvTest, SameDtypesComposeAsTheLayerDid) {
  const Tensor x = normal({1, 4, 4, 3}, 31, kFloat32);
  const Tensor w = normal({3, 3, 3, 4}, 32, kFloat32).set_requires_grad(true);
  const Tensor y = ops::autocast_conv2d(x, w, Tensor(), {}, {});
  EXPECT_EQ(y.grad_fn()->name(), "Conv2dBackward");
  EXPECT_EQ(y.to_vector<float>(), conv2d(x, w, Tensor(), {}).to_vector<float>());
  // A bias in another dtype than the kernel is not read inside: the composition checks it.
  const Tensor x16 = x.to(kBFloat16);
  const Tensor b64 = normal({4}, 33, kFloat64);
  const Tensor y16 = ops::autocast_conv2d(x16, w, b64, {}, {});
  EXPECT_EQ(y16.to_vector<float>(),
            conv2d(x16, w.to(kBFloat16), b64.to(kBFloat16), {}).to_vector<float>());
}

TEST(AutocastConvTest, MixedPolicyLayersRecordOneNode) {
  testing::PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  layers::Conv2D conv(8, 3, {.padding = "same", .activation = "relu6"});
  layers::DepthwiseConv2D depthwise(3, {.padding = "same"});
  const Tensor x = normal({2, 6, 6, 4}, 41, kFloat32);
  const Tensor h = conv(x);
  const Tensor y = depthwise(h);
  for (const Tensor* t : {&h, &y}) {
    ASSERT_TRUE(t->grad_fn());
    EXPECT_EQ(t->dtype(), kBFloat16);
    for (std::size_t i = 1; i < t->grad_fn()->next.size(); ++i) {
      EXPECT_EQ(t->grad_fn()->next[i]->name(), "AccumulateGrad") << t->grad_fn()->name() << i;
    }
  }
  const std::vector<Tensor> g =
      grad(sum(y.to(kFloat32)), {conv.kernel(), conv.bias(), depthwise.depthwise_kernel()});
  for (const Tensor& t : g) EXPECT_EQ(t.dtype(), kFloat32);
}

}  // namespace
}  // namespace mixprec
