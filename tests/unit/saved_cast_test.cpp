// Saved casts of variables (autograd/saved_cast.h): inside a RecastScope a convolution keeps the
// float32 variable instead of its 16-bit cast and casts again in backward, with the same gradients;
// a training step opens the scope, so the 16-bit weight copies are not live after the forward.
#include "autograd/saved_cast.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using autograd::RecastScope;

Tensor variable(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return random_normal(shape, 0.0, 0.1, {}, gen).set_requires_grad(true);
}

std::int64_t live_bytes() { return memory_stats().current_bytes; }

TEST(SavedCastTest, RecipeOnlyInsideTheScopeAndOnlyForAWholeCastOfALeaf) {
  const Tensor w = variable({4, 6}, 1);
  const Tensor w16 = w.to(kBFloat16);
  EXPECT_FALSE(autograd::saved_cast_of(w16));  // no scope
  RecastScope scope;
  const std::optional<autograd::SavedCast> recipe = autograd::saved_cast_of(w16);
  ASSERT_TRUE(recipe);
  EXPECT_TRUE(recipe->variable.same(w));
  EXPECT_EQ(recipe->dtype, kBFloat16);
  EXPECT_EQ(recipe->recast().to_vector<float>(), w16.to_vector<float>());
  EXPECT_FALSE(recipe->recast().requires_grad());
  EXPECT_FALSE(autograd::saved_cast_of(w));                         // not a cast
  EXPECT_FALSE(autograd::saved_cast_of((w * 2.0).to(kBFloat16)));   // cast of a non-leaf
  EXPECT_FALSE(autograd::saved_cast_of(w16.slice(0, 1, 3)));        // a view of the cast
  EXPECT_FALSE(autograd::saved_cast_of(w.detach().to(kBFloat16)));  // not recorded
  EXPECT_FALSE(autograd::saved_cast_of(Tensor()));
  {
    RecastScope nested;
    EXPECT_TRUE(autograd::saved_cast_of(w16));
  }
  EXPECT_TRUE(autograd::recast_enabled());  // the outer scope is still alive
}

struct ConvRun {
  std::int64_t kept_after_forward = 0;  // bytes live after the forward, less the output's
  std::vector<float> dx, dw;
};

// y = conv(x, w as bfloat16) with or without a RecastScope around the forward; the cast is a
// temporary of the forward, as a layer's read of its variable is.
ConvRun run_conv(bool depthwise, bool recast) {
  const Tensor x = variable({2, 5, 5, 16}, 2).detach().to(kBFloat16).set_requires_grad(true);
  const Tensor w = variable(depthwise ? Shape{3, 3, 16, 2} : Shape{3, 3, 16, 64}, 3);
  ConvRun run;
  Tensor y;
  {
    std::optional<RecastScope> scope;
    if (recast) scope.emplace();
    const std::int64_t before = live_bytes();
    const Conv2dOptions options{.padding = Padding::same};
    y = depthwise ? depthwise_conv2d(x, w.to(kBFloat16), Tensor(), options)
                  : conv2d(x, w.to(kBFloat16), Tensor(), options);
    run.kept_after_forward = live_bytes() - before - static_cast<std::int64_t>(y.nbytes());
  }
  const std::vector<Tensor> g = grad(sum(y.to(kFloat32)), {x, w});
  run.dx = g[0].to_vector<float>();
  run.dw = g[1].to_vector<float>();
  return run;
}

TEST(SavedCastTest, ConvolutionRecastsItsFiltersWithTheSameGradients) {
  for (const bool depthwise : {false, true}) {
    SCOPED_TRACE(depthwise ? "depthwise_conv2d" : "conv2d");
    const ConvRun kept = run_conv(depthwise, false);
    const ConvRun recast = run_conv(depthwise, true);
    const std::int64_t filters16 = (depthwise ? 3 * 3 * 16 * 2 : 3 * 3 * 16 * 64) * 2;
    // Without the scope the node keeps the bfloat16 filters; with it, nothing new stays live.
    EXPECT_EQ(kept.kept_after_forward, filters16);
    EXPECT_EQ(recast.kept_after_forward, 0);
    // Bit for bit: the recast filters are the values the forward's cast produced.
    EXPECT_EQ(recast.dx, kept.dx);
    EXPECT_EQ(recast.dw, kept.dw);
  }
}

TEST(SavedCastTest, RetainedGraphRecastsAgainForASecondBackward) {
  const Tensor x = variable({1, 4, 4, 8}, 4).detach().to(kBFloat16).set_requires_grad(true);
  const Tensor w = variable({3, 3, 8, 8}, 5);
  Tensor loss;
  {
    RecastScope scope;
    loss = sum(conv2d(x, w.to(kBFloat16), Tensor(), {.padding = Padding::same}).to(kFloat32));
  }
  const auto first = grad(loss, {x}, Tensor(), RetainGraph::yes)[0].to_vector<float>();
  const auto second = grad(loss, {x})[0].to_vector<float>();
  EXPECT_EQ(first, second);
}

// An identity layer that reads the live tensor bytes when it is called (in the middle of the
// forward, after the convolution).
class ProbeImpl final : public layers::LayerImpl {
 public:
  explicit ProbeImpl(std::int64_t* reading) : LayerImpl("Probe", {}), reading_(reading) {}
  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& s) const override {
    return s;
  }
  std::vector<Tensor> call(const std::vector<Tensor>& in, const CallOptions&) override {
    *reading_ = live_bytes();
    return {in[0] * 1.0};
  }

 private:
  std::int64_t* reading_;
};

TEST(SavedCastTest, TrainingStepDoesNotKeepTheBfloat16Kernels) {
  testing::PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  std::int64_t reading = 0;
  const KerasTensor in = Input({6, 6, 32});
  // The first convolution's input needs no gradient, so its node never keeps the filters.
  KerasTensor h = layers::Conv2D(32, 1, {.name = "first"})(in);
  h = layers::Conv2D(96, 3, {.padding = "same", .name = "big_kernel"})(h);
  h = layers::Layer(std::make_shared<ProbeImpl>(&reading))(h);
  h = layers::GlobalAveragePooling2D()(h);
  h = layers::Dense(3)(h);
  Model model(in, layers::Activation("linear", {.dtype = mixed_precision::Policy("float32")})(h));
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.01}),
                 .loss = std::string("sparse_categorical_crossentropy")});
  Generator gen(6);
  const Tensor x = random_uniform({4, 6, 6, 32}, 0.0, 1.0, {}, gen);
  const Tensor y = from_vector(std::vector<std::int64_t>{0, 1, 2, 1}, {4});
  model.train_on_batch(x, y);  // first step: builds the optimizer's state

  std::int64_t before = live_bytes();
  model.train_on_batch(x, y);
  const std::int64_t in_step = reading - before;
  // The same forward outside a training step (a user's GradientTape may change the variables
  // before its backward): the second convolution's node keeps its bfloat16 kernel.
  before = live_bytes();
  const Tensor out = model(x, CallOptions{.training = true});
  const std::int64_t outside = reading - before;
  // (A few bytes of scalars differ between the two paths: the step's metric state.)
  constexpr std::int64_t kKernel16 = 3 * 3 * 32 * 96 * 2;
  EXPECT_GE(outside - in_step, kKernel16);
  EXPECT_LE(outside - in_step, kKernel16 + 256);
}

}  // namespace
}  // namespace mixprec
