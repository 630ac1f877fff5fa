// The functional model's BatchNormalization + Activation fusion (src/models/model.cpp): an
// EfficientNet-B0-like block gives the same outputs, loss, gradients and moving statistics with
// the fusion on and off (float32 and mixed_bfloat16, training and inference); the fused op runs
// exactly where the rules allow (an Activation that is the BN output's only reader, of a fused
// activation, computing in the BN's dtype), and the model's layers and config do not change.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "ops/batch_norm_activation.h"
#include "support/fusion_guard.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::FusionGuard;
using testing::output_node;
using testing::PolicyGuard;
namespace L = layers;

// Input (8, 8, 4) -> Conv2D -> BN -> swish -> DepthwiseConv2D -> BN -> relu6 -> Conv2D 1x1 -> BN
// whose output feeds both a sigmoid Activation and an Add (two readers: not fused) -> BN -> relu
// -> GlobalAveragePooling2D -> Dense(3) in float32.
Model block_model() {
  set_seed(5);
  const KerasTensor in = Input({8, 8, 4});
  KerasTensor x = L::Conv2D(16, 3, {.padding = Padding::same, .use_bias = false})(in);
  x = L::BatchNormalization({.momentum = 0.9})(x);
  x = L::Activation("swish")(x);
  x = L::DepthwiseConv2D(3, {.padding = Padding::same, .use_bias = false})(x);
  x = L::BatchNormalization({.momentum = 0.9})(x);
  x = L::Activation("relu6")(x);
  x = L::Conv2D(8, 1, {.use_bias = false})(x);
  const KerasTensor shared = L::BatchNormalization({.momentum = 0.9})(x);
  x = L::Add()({shared, L::Activation("sigmoid")(shared)});
  x = L::BatchNormalization({.momentum = 0.9})(x);
  x = L::Activation("relu")(x);
  x = L::GlobalAveragePooling2D()(x);
  x = L::Dense(3, {.dtype = "float32"})(x);
  return Model(in, x);
}

struct StepResult {
  Tensor inference, loss;
  std::vector<Tensor> grads, weights_after;
};

StepResult run(Model& m, const std::vector<Tensor>& weights, bool fusion) {
  FusionGuard guard(fusion);
  m.set_weights(weights);
  Generator gen(9);
  const Tensor x = random_uniform({4, 8, 8, 4}, -1.0, 2.0, {}, gen);
  const Tensor labels = from_vector(std::vector<std::int64_t>{0, 2, 1, 2}, {4});
  StepResult r;
  r.inference = m(x);
  GradientTape tape;
  const Tensor y = m(x, {.training = true});
  r.loss = losses::SparseCategoricalCrossentropy()(labels, y);
  r.grads = tape.gradient(r.loss, m.trainable_variables());
  r.weights_after = m.get_weights();  // includes the updated moving statistics
  return r;
}

// ||a - b|| / ||b|| over all elements (float64).
double relative_error(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    num += (av[i] - bv[i]) * (av[i] - bv[i]);
    den += bv[i] * bv[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Every tensor of `a` within `tol` (relative L2 error) of `b`'s.
void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined()) << what << " " << i;
    EXPECT_LT(relative_error(a[i], b[i]), tol) << what << " " << i;
  }
}

std::vector<Tensor> results(const StepResult& r) {
  std::vector<Tensor> all{r.inference, r.loss};
  all.insert(all.end(), r.grads.begin(), r.grads.end());
  all.insert(all.end(), r.weights_after.begin(), r.weights_after.end());
  return all;
}

TEST(BatchNormActivationFusion, SameResultsFloat32) {
  PolicyGuard p("float32");
  Model m = block_model();
  const std::vector<Tensor> w = m.get_weights();
  const std::string config = m.to_json();
  const StepResult fused = run(m, w, true);
  const StepResult plain = run(m, w, false);
  EXPECT_EQ(m.to_json(), config);
  // Sums over the batch in another order (loops against oneDNN): float32 rounding only.
  expect_close(results(fused), results(plain), 1e-4, "fused vs unfused");
  // The moving statistics did move (the comparison is not between two unchanged copies).
  double moved = 0;
  for (std::size_t i = 0; i < w.size(); ++i) moved += relative_error(fused.weights_after[i], w[i]);
  EXPECT_GT(moved, 1e-3);
}

// mixed_bfloat16: the unfused path rounds bn(x) to bfloat16 before the activation, the fused one
// does not, so the two differ by bfloat16 noise (several percent in small gradients). Against the
// float32 model on the same weights, the fused run is as accurate as the unfused one.
TEST(BatchNormActivationFusion, MixedBfloat16AsAccurateAsUnfused) {
  StepResult reference;
  std::vector<Tensor> w;
  {
    PolicyGuard p("float32");
    Model m = block_model();
    w = m.get_weights();
    reference = run(m, w, false);
  }
  PolicyGuard p("mixed_bfloat16");
  Model m = block_model();
  const StepResult fused = run(m, w, true);
  const StepResult plain = run(m, w, false);
  const std::vector<Tensor> f = results(fused), u = results(plain), r = results(reference);
  ASSERT_EQ(f.size(), r.size());
  // One draw of bfloat16 noise: per result the fused error is within a small factor of the
  // unfused one (for some small gradients it is larger by chance, 1.9x the worst seen), and summed
  // over all results at most 1.3x (over seeds 1-3 it was 0.8-1.0x: bn(x) is not rounded; 1.19x
  // for this one).
  double sum_f = 0, sum_u = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double ef = relative_error(f[i], r[i]), eu = relative_error(u[i], r[i]);
    EXPECT_LT(ef, 2.5 * eu + 5e-3) << "result " << i << ": fused " << ef << ", unfused " << eu;
    sum_f += ef;
    sum_u += eu;
  }
  EXPECT_LT(sum_f, 1.3 * sum_u);
}

// Which graphs fuse: the BN -> Activation pair at the end of a model, yes; a BN that is itself a
// model output, an Activation that casts (its own float32 policy under mixed_bfloat16) or one that
// is not fused (tanh), no.
TEST(BatchNormActivationFusion, WhereItApplies) {
  PolicyGuard p("mixed_bfloat16");
  const Tensor x = random_uniform({2, 4, 4, 3});
  const auto model = [](const std::string& act, std::optional<mixed_precision::Policy> dtype) {
    const KerasTensor in = Input({4, 4, 3});
    const KerasTensor bn = L::BatchNormalization()(L::Conv2D(8, 1)(in));
    return Model(in, L::Activation(act, {.dtype = dtype})(bn));
  };
  const Model relu = model("relu", std::nullopt);
  EXPECT_EQ(output_node(relu, x, true), "BatchNormActivationTrainingBackward");
  EXPECT_NE(output_node(relu, x, false), "BatchNormActivationTrainingBackward");
  EXPECT_NE(output_node(model("tanh", std::nullopt), x, true),
            "BatchNormActivationTrainingBackward");
  EXPECT_NE(output_node(model("relu", mixed_precision::Policy("float32")), x, true),
            "BatchNormActivationTrainingBackward");
  {
    // Inference mode fuses too.
    FusionGuard guard(true);
    const Tensor xi = x.detach().set_requires_grad(true);
    const Tensor y = relu(xi);
    ASSERT_TRUE(y.grad_fn());
    EXPECT_EQ(y.grad_fn()->name(), "BatchNormActivationInferenceBackward");
  }
  // The BN output is also a model output: not fused, both outputs as without fusion.
  const KerasTensor in = Input({4, 4, 3});
  const KerasTensor bn = L::BatchNormalization()(in);
  const Model both(std::vector<KerasTensor>{in},
                   std::vector<KerasTensor>{bn, L::Activation("relu")(bn)});
  FusionGuard guard(true);
  const std::vector<Tensor> outs = both(std::vector<Tensor>{x}, {.training = true});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_NE(outs[1].grad_fn()->name(), "BatchNormActivationTrainingBackward");
  EXPECT_EQ(outs[0].grad_fn()->name(), "BatchNormTrainingBackward");
}

}  // namespace
}  // namespace mixprec
