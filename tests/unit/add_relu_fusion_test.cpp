// ops::add_relu and the functional model's Add + ReLU fusion (src/models/model.cpp): the op equals
// relu(add(a, b)) bit for bit, forward and gradients, in every floating dtype, with broadcasting
// and with sums that round to zero or cancel exactly; a residual model gives the same bits with
// the fusion on and off; the fused op runs exactly where the rules allow (an Add whose only reader
// is a relu Activation in its dtype), never for Multiply, other activations or a shared output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "ops/add_relu.h"
#include "ops/batch_norm_activation.h"
#include "support/fusion_guard.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::FusionGuard;
using testing::output_node;
using testing::PolicyGuard;
namespace L = layers;

// Element-by-element equality of the stored bits (so -0 and +0 differ, NaNs compare).
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.detach().contiguous(), w = want.detach().contiguous();
  ASSERT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()), 0) << what;
}

TEST(AddReluTest, EqualsReluOfAddBitForBit) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    set_seed(3);
    // a + b: random sums, exact cancellations (b = -a), and sums that round to zero in 16 bits.
    Tensor a = random_uniform({6, 5, 8}, -1.0, 1.0, {.dtype = dtype});
    Tensor b = random_uniform({6, 5, 8}, -1.0, 1.0, {.dtype = dtype});
    b = where(greater(random_uniform({6, 5, 8}), scalar(0.7)), neg(a), b);
    b = where(greater(random_uniform({6, 5, 8}), scalar(0.9)), a * 1e-9, b).to(dtype);
    for (const Shape& bshape : {Shape{6, 5, 8}, Shape{8}}) {
      const Tensor bb = bshape == b.shape() ? b : b.slice(0, 0, 1).slice(1, 0, 1).reshape(bshape);
      const Tensor a1 = a.detach().set_requires_grad(true),
                   b1 = bb.detach().set_requires_grad(true);
      const Tensor a2 = a.detach().set_requires_grad(true),
                   b2 = bb.detach().set_requires_grad(true);
      const Tensor fused = ops::add_relu(a1, b1);
      const Tensor plain = relu(add(a2, b2));
      expect_same_bits(fused, plain, "forward " + bshape.to_string());
      ASSERT_TRUE(fused.grad_fn());
      EXPECT_EQ(fused.grad_fn()->name(), "AddReluBackward");
      const Tensor weight = random_uniform(plain.shape(), 0.5, 1.5, {.dtype = dtype});
      const std::vector<Tensor> gf = grad(sum(fused * weight), {a1, b1});
      const std::vector<Tensor> gp = grad(sum(plain * weight), {a2, b2});
      expect_same_bits(gf[0], gp[0], "gradient of a " + bshape.to_string());
      expect_same_bits(gf[1], gp[1], "gradient of b " + bshape.to_string());
    }
  }
}

TEST(AddReluTest, SpecialValuesAsReluOfAdd) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> av = {1.0, -0.0, -0.0, inf, -inf, inf, std::nan(""), 65504.0, -1e-30};
  const std::vector<double> bv = {-1.0, -0.0, 0.0, 1.0, 1.0, -inf, 1.0, 65504.0, 1e-30};
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor a = from_vector(av, {9}).to(dtype), b = from_vector(bv, {9}).to(dtype);
    expect_same_bits(ops::add_relu(a, b), relu(add(a, b)), "special values");
  }
}

TEST(AddReluTest, RefusesWhatAddRefuses) {
  const Tensor a = ones({2, 3});
  EXPECT_THROW(ops::add_relu(a, ones({4})), ShapeError);
  EXPECT_THROW(ops::add_relu(a, ones({2, 3}, {.dtype = DType::float16})), DTypeError);
  EXPECT_THROW(
      ops::add_relu(ones({2}, {.dtype = DType::int32}), ones({2}, {.dtype = DType::int32})),
      DTypeError);
}

// Input -> Conv2D -> BN -> Add(input projection) -> relu -> Conv2D -> Add(previous) -> relu ->
// GlobalAveragePooling2D -> Dense: two residual ends.
Model residual_model() {
  set_seed(7);
  const KerasTensor in = Input({6, 6, 4});
  const KerasTensor shortcut = L::Conv2D(8, 1, {.use_bias = false})(in);
  KerasTensor x = L::Conv2D(8, 3, {.padding = Padding::same, .use_bias = false})(in);
  x = L::BatchNormalization()(x);
  const KerasTensor y = L::Activation("relu")(L::Add()({shortcut, x}));
  x = L::Conv2D(8, 3, {.padding = Padding::same})(y);
  x = L::Activation("relu")(L::Add()({y, x}));
  x = L::GlobalAveragePooling2D()(x);
  return Model(in, L::Dense(3, {.dtype = "float32"})(x));
}

std::vector<Tensor> step(Model& m, const std::vector<Tensor>& weights, bool fusion) {
  FusionGuard guard(fusion);
  m.set_weights(weights);
  Generator gen(11);
  const Tensor x = random_uniform({3, 6, 6, 4}, -1.0, 2.0, {}, gen);
  const Tensor labels = from_vector(std::vector<std::int64_t>{0, 2, 1}, {3});
  GradientTape tape;
  const Tensor out = m(x, {.training = true});
  const Tensor loss = losses::SparseCategoricalCrossentropy()(labels, out);
  std::vector<Tensor> all = tape.gradient(loss, m.trainable_variables());
  all.push_back(out);
  all.push_back(loss);
  return all;
}

TEST(AddReluTest, ResidualModelGivesTheSameBitsFusedAndUnfused) {
  for (const char* policy : {"float32", "mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    PolicyGuard p(policy);
    Model m = residual_model();
    const std::vector<Tensor> w = m.get_weights();
    const std::vector<Tensor> fused = step(m, w, true), plain = step(m, w, false);
    ASSERT_EQ(fused.size(), plain.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      expect_same_bits(fused[i], plain[i], "result " + std::to_string(i));
    }
  }
}

TEST(AddReluTest, WhereTheModelFusesIt) {
  const Tensor x = random_uniform({2, 4, 4, 3});
  const auto model = [](bool add, const std::string& act) {
    const KerasTensor in = Input({4, 4, 3});
    const KerasTensor c = L::Conv2D(3, 1)(in);
    const KerasTensor merged = add ? L::Add()({in, c}) : L::Multiply()({in, c});
    return Model(in, L::Activation(act)(merged));
  };
  EXPECT_EQ(output_node(model(true, "relu"), x, true), "AddReluBackward");
  EXPECT_NE(output_node(model(true, "relu"), x, false), "AddReluBackward");
  EXPECT_NE(output_node(model(true, "relu6"), x, true), "AddReluBackward");
  EXPECT_NE(output_node(model(false, "relu"), x, true), "AddReluBackward");
  // Three inputs: the last sum is the fused one.
  {
    const KerasTensor in = Input({4, 4, 3});
    const Model three(in, L::Activation("relu")(L::Add()({in, in, L::Conv2D(3, 1)(in)})));
    EXPECT_EQ(output_node(three, x, true), "AddReluBackward");
  }
  // The Add output is also a model output: not fused.
  const KerasTensor in = Input({4, 4, 3});
  const KerasTensor sum_out = L::Add()({in, L::Conv2D(3, 1)(in)});
  const Model both(std::vector<KerasTensor>{in},
                   std::vector<KerasTensor>{sum_out, L::Activation("relu")(sum_out)});
  FusionGuard guard(true);
  const std::vector<Tensor> outs = both(std::vector<Tensor>{x}, {.training = true});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_NE(outs[1].grad_fn()->name(), "AddReluBackward");
}

}  // namespace
}  // namespace mixprec
