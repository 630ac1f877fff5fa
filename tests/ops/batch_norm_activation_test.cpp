// The fused batch normalization + activation op (ops/batch_norm_activation.h): the fused CPU
// kernel against the composition batch_norm_* then the activation (forward, statistics and the
// gradients of x, gamma and beta, training and inference), 16-bit storage against float32 on the
// same values (DESIGN §4), the mixed case (16-bit x, float32 parameters), the composed fallback
// (float64) and errors.
#include "ops/batch_norm_activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/cpu/batch_norm_activation.h"
#include "mixprec/mixprec.h"
#include "mixprec/nn_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::activation;
using testing::all_close;
using testing::check_low_precision;
using testing::expect_error;
using testing::normal;
using testing::Tolerance;

constexpr double kEps = 1e-3;
constexpr UnaryOp kActs[] = {UnaryOp::relu, UnaryOp::relu6, UnaryOp::sigmoid, UnaryOp::silu};

std::string node_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "leaf"; }

struct Inputs {
  Tensor x, gamma, beta, dy, moving_mean, moving_variance;
};

// Values that straddle the activations' kinks (0 and 6) and saturate the sigmoid: x ~ N(0.7, 2)
// per channel, gamma ~ N(1.5, 1), beta ~ N(0.5, 2).
Inputs inputs(const Shape& shape, DType dtype) {
  const std::int64_t c = shape[shape.rank() - 1];
  const DType param = dtype == DType::float64 ? dtype : DType::float32;
  Inputs in;
  in.x = normal(shape, 21, 0.7, 2.0, dtype).set_requires_grad(true);
  in.gamma = normal({c}, 22, 1.5, 1.0, param).set_requires_grad(true);
  in.beta = normal({c}, 23, 0.5, 2.0, param).set_requires_grad(true);
  in.dy = normal(shape, 24, 0.1, 1.0, dtype);
  in.moving_mean = normal({c}, 25, 0.5, 0.5, param);
  in.moving_variance = random_uniform({c}, 0.5, 3.0, {.dtype = param});
  return in;
}

// y, then the gradients of sum(y * dy) for x, gamma, beta.
std::vector<Tensor> with_grads(const Tensor& y, const Inputs& in) {
  std::vector<Tensor> out{y};
  for (Tensor& g : grad(sum(mul(y, in.dy)), {in.x, in.gamma, in.beta})) out.push_back(g);
  return out;
}

class BatchNormActivationShapes : public ::testing::TestWithParam<Shape> {};

// float32: the fused kernel (oneDNN-free loops) against oneDNN batch norm + the activation op.
TEST_P(BatchNormActivationShapes, TrainingMatchesComposition) {
  const Shape shape = GetParam();
  for (UnaryOp act : kActs) {
    const Inputs in = inputs(shape, DType::float32);
    const BatchNormOutput fused =
        ops::batch_norm_activation_training(in.x, in.gamma, in.beta, kEps, act);
    EXPECT_EQ(node_name(fused.y), "BatchNormActivationTrainingBackward");
    const BatchNormOutput plain = batch_norm_training(in.x, in.gamma, in.beta, kEps);
    const std::vector<Tensor> a = with_grads(fused.y, in);
    const std::vector<Tensor> b = with_grads(activation(act, plain.y), in);
    const std::string what = std::string(op_name(act)) + " " + shape.to_string();
    EXPECT_TRUE(all_close(fused.mean, plain.mean, {1e-6, 1e-6})) << what;
    EXPECT_TRUE(all_close(fused.variance, plain.variance, {1e-5, 1e-6})) << what;
    // dgamma, dbeta: sums over M rows in different orders, absolute error ~ sqrt(M) * 1e-6.
    const double m = static_cast<double>(in.x.numel() / in.x.dim(-1));
    const Tolerance sums{2e-5, 1e-5 * std::sqrt(m)};
    const char* names[] = {"y", "dx", "dgamma", "dbeta"};
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(all_close(a[i], b[i], i < 2 ? Tolerance{2e-5, 2e-5} : sums))
          << what << " " << names[i];
    }
  }
}

TEST_P(BatchNormActivationShapes, InferenceMatchesComposition) {
  const Shape shape = GetParam();
  for (UnaryOp act : kActs) {
    const Inputs in = inputs(shape, DType::float32);
    const Tensor fused = ops::batch_norm_activation_inference(
        in.x, in.gamma, in.beta, in.moving_mean, in.moving_variance, kEps, act);
    EXPECT_EQ(node_name(fused), "BatchNormActivationInferenceBackward");
    const Tensor plain =
        batch_norm_inference(in.x, in.gamma, in.beta, in.moving_mean, in.moving_variance, kEps);
    const std::vector<Tensor> a = with_grads(fused, in);
    const std::vector<Tensor> b = with_grads(activation(act, plain), in);
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(all_close(a[i], b[i], {2e-5, 2e-5})) << op_name(act) << " output " << i;
    }
  }
}

// NHWC activations (channels 16 and 24: oneDNN's jit and C not a multiple of 16), a 2-D batch,
// and one large enough to run the loops on several blocks in parallel.
INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormActivationShapes,
                         ::testing::Values(Shape{4, 5, 5, 16}, Shape{3, 7, 6, 24}, Shape{9, 3},
                                           Shape{8, 32, 32, 32}));

// 16-bit storage against float32 on the same rounded values, parameters in 16 bits too.
TEST(BatchNormActivation, SixteenBitAgainstFloat32) {
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (UnaryOp act : kActs) {
      const Inputs in = inputs({4, 6, 6, 16}, DType::float32);
      const auto training = [act](const std::vector<Tensor>& v) {
        return ops::batch_norm_activation_training(v[0], v[1], v[2], kEps, act).y;
      };
      EXPECT_TRUE(check_low_precision(training,
                                      {in.x.detach(), in.gamma.detach(), in.beta.detach()}, dtype))
          << dtype_name(dtype) << " " << op_name(act);
      // The moving statistics rounded to 16 bits in both runs (the same values).
      const auto inference = [act, dtype, &in](const std::vector<Tensor>& v) {
        return ops::batch_norm_activation_inference(
            v[0], v[1], v[2], in.moving_mean.to(dtype).to(v[0].dtype()),
            in.moving_variance.to(dtype).to(v[0].dtype()), kEps, act);
      };
      EXPECT_TRUE(check_low_precision(inference,
                                      {in.x.detach(), in.gamma.detach(), in.beta.detach()}, dtype))
          << dtype_name(dtype) << " inference " << op_name(act);
    }
  }
}

// The mixed case the layers run: 16-bit x, float32 parameters and statistics; the result and
// the gradients against the same op on the widened x (gradients of gamma, beta stay float32).
TEST(BatchNormActivation, MixedSixteenBitInputFloat32Parameters) {
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (UnaryOp act : kActs) {
      Inputs in = inputs({4, 6, 6, 16}, DType::float32);
      const Tensor x16 = in.x.detach().to(dtype).set_requires_grad(true);
      const Tensor x32 = x16.detach().to(DType::float32).set_requires_grad(true);
      const Tensor dy16 = in.dy.to(dtype);
      const BatchNormOutput a =
          ops::batch_norm_activation_training(x16, in.gamma, in.beta, kEps, act);
      EXPECT_EQ(a.y.dtype(), dtype);
      EXPECT_EQ(a.mean.dtype(), DType::float32);
      const auto ga =
          grad(sum(mul(a.y.to(DType::float32), dy16.to(DType::float32))), {x16, in.gamma, in.beta});
      const BatchNormOutput b =
          ops::batch_norm_activation_training(x32, in.gamma, in.beta, kEps, act);
      const auto gb = grad(sum(mul(b.y, dy16.to(DType::float32))), {x32, in.gamma, in.beta});
      const Tolerance tol = testing::tolerance_for(dtype);
      const Tolerance loose{4 * tol.rtol, 4 * tol.rtol};
      const std::string what = std::string(dtype_name(dtype)) + " " + op_name(act);
      EXPECT_TRUE(all_close(a.mean, b.mean, {1e-6, 1e-6})) << what;
      EXPECT_TRUE(all_close(a.y.to(DType::float32), b.y, loose)) << what;
      EXPECT_TRUE(all_close(ga[0].to(DType::float32), gb[0], loose)) << what;
      EXPECT_EQ(ga[1].dtype(), DType::float32);
      EXPECT_TRUE(all_close(ga[1], gb[1], {1e-4, 1e-4})) << what;
      EXPECT_TRUE(all_close(ga[2], gb[2], {1e-4, 1e-4})) << what;
    }
  }
}

// float64 has no fused kernel: the op composes the two ops (same values, their autograd nodes).
TEST(BatchNormActivation, Float64Composes) {
  const Inputs in = inputs({3, 4, 4, 8}, DType::float64);
  const BatchNormOutput fused =
      ops::batch_norm_activation_training(in.x, in.gamma, in.beta, kEps, UnaryOp::silu);
  EXPECT_NE(node_name(fused.y), "BatchNormActivationTrainingBackward");
  const Tensor plain = silu(batch_norm_training(in.x, in.gamma, in.beta, kEps).y);
  EXPECT_TRUE(all_close(fused.y, plain, {1e-12, 1e-12}));
  EXPECT_FALSE(cpu::batch_norm_activation_supported(DType::float64, UnaryOp::relu));
  EXPECT_FALSE(cpu::batch_norm_activation_supported(DType::float32, UnaryOp::tanh));
  EXPECT_TRUE(cpu::batch_norm_activation_supported(DType::bfloat16, UnaryOp::relu6));
}

TEST(BatchNormActivation, ActivationNamesAndErrors) {
  EXPECT_EQ(ops::fusable_activation("swish"), UnaryOp::silu);
  EXPECT_EQ(ops::fusable_activation("silu"), UnaryOp::silu);
  EXPECT_EQ(ops::fusable_activation("relu6"), UnaryOp::relu6);
  EXPECT_EQ(ops::fusable_activation("tanh"), std::nullopt);
  EXPECT_EQ(ops::fusable_activation("softmax"), std::nullopt);
  const Inputs in = inputs({2, 3, 3, 4}, DType::float32);
  expect_error<ValueError>(
      [&] { ops::batch_norm_activation_training(in.x, in.gamma, in.beta, kEps, UnaryOp::tanh); },
      {"batch_norm_activation_training: activation tanh is not fused"});
  expect_error<ShapeError>(
      [&] { ops::batch_norm_activation_training(in.x, ones({5}), in.beta, kEps, UnaryOp::relu); },
      {"batch_norm_activation_training: gamma must have shape"});
  expect_error<ValueError>(
      [&] {
        ops::batch_norm_activation_inference(in.x, in.gamma, in.beta, in.moving_mean,
                                             in.moving_variance, -1.0, UnaryOp::relu);
      },
      {"batch_norm_activation_inference: epsilon must be a positive finite number"});
}

// The switch: an override wins over the environment, nullopt restores it.
TEST(BatchNormActivation, FusionSwitch) {
  ops::set_batch_norm_activation_fusion(false);
  EXPECT_FALSE(ops::batch_norm_activation_fusion_enabled());
  ops::set_batch_norm_activation_fusion(true);
  EXPECT_TRUE(ops::batch_norm_activation_fusion_enabled());
  ops::set_batch_norm_activation_fusion(std::nullopt);
}

}  // namespace
}  // namespace mixprec
