// batch_norm_training / batch_norm_inference on CUDA (own kernels, cuda/batch_norm.h) against the
// CPU: y, the batch statistics (float32) and the gradients of x, gamma and beta, for float32,
// float16, bfloat16 (with float32 parameters, the mixed-policy case, and with 16-bit ones) and
// float64; NHWC and (N, C) inputs; a large mean (the two-pass variance must not cancel); errors.
//
// Tolerances: DESIGN §4's for y and the statistics (both sides sum in float with partial sums
// added in double); the gradients through the batch statistics, dy - mean(dy) - xhat *
// mean(dy * xhat), cancel, so they get 4x (16-bit: rounded inputs to the same formula).
// The fused batch normalization + activation (ops/batch_norm_activation.h: relu, relu6, sigmoid,
// silu) against the CPU's fused kernels, training and inference: the same float formulas, the
// activations through each side's float math library (a few float32 ulps apart), so y gets the
// dtype's tolerance scaled 4 and the gradients 4x as above.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "ops/batch_norm_activation.h"

namespace mixprec::testing {
namespace {

void expect_training_matches(const Shape& shape, DType dtype, DType param_dtype, double offset) {
  SCOPED_TRACE(shape.to_string() + " " + std::string(dtype_name(dtype)) + " parameters " +
               std::string(dtype_name(param_dtype)) + " offset " + std::to_string(offset));
  const std::int64_t c = shape[shape.rank() - 1];
  const Tensor x = sample(shape, offset - 2, offset + 2, dtype, 1);
  const Tensor gamma = sample({c}, 0.5, 1.5, param_dtype, 2);
  const Tensor beta = sample({c}, -1, 1, param_dtype, 3);
  std::vector<Tensor> cpu_in = {x.detach(), gamma.detach(), beta.detach()};
  for (Tensor& t : cpu_in) t.set_requires_grad(true);
  const std::vector<Tensor> gpu_in = {on_gpu(x, true), on_gpu(gamma, true), on_gpu(beta, true)};
  const double epsilon = 1e-3;
  const BatchNormOutput r_cpu = batch_norm_training(cpu_in[0], cpu_in[1], cpu_in[2], epsilon);
  const BatchNormOutput r_gpu = batch_norm_training(gpu_in[0], gpu_in[1], gpu_in[2], epsilon);
  const DType stat = dtype == DType::float64 ? DType::float64 : DType::float32;
  ASSERT_TRUE(matches(r_gpu.y, r_cpu.y, tolerance_for(dtype))) << "y";
  EXPECT_EQ(r_gpu.mean.dtype(), stat);
  EXPECT_TRUE(matches(r_gpu.mean, r_cpu.mean, tolerance_for(stat))) << "mean";
  EXPECT_TRUE(matches(r_gpu.variance, r_cpu.variance, scaled(tolerance_for(stat), 4)))
      << "variance";
  const Tensor weighting = sample(shape, 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> g_cpu = grad(r_cpu.y, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(r_gpu.y, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_gpu.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(g_gpu[k].dtype(), cpu_in[k].dtype()) << "gradient " << k << " in its input's dtype";
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], scaled(tolerance_for(g_cpu[k].dtype()), 4)))
        << "gradient of input " << k;
  }
}

TEST(GpuBatchNormTest, TrainingMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    const DType params = dtype == DType::float64 ? DType::float64 : DType::float32;
    expect_training_matches({4, 5, 6, 7}, dtype, params, 0.0);
    expect_training_matches({33, 3}, dtype, params, 0.0);
  }
  // 16-bit parameters are accepted too.
  expect_training_matches({2, 3, 3, 8}, DType::float16, DType::float16, 0.0);
  // Enough rows that the launchers' parts hold several rows each (8192 parts: Welford runs of 8
  // and 13 rows on the device), the vector path and the single-channel one.
  expect_training_matches({64, 32, 32, 32}, DType::float16, DType::float32, 0.5);
  expect_training_matches({100000, 3}, DType::float32, DType::float32, 0.5);
}

TEST(GpuBatchNormTest, VarianceDoesNotCancelForALargeMean) {
  MIXPREC_REQUIRE_GPU();
  // Values 1000 +- 2 (variance ~1.33): E[x^2] - E[x]^2 in float32 would be off by ~5%; the two
  // passes stay within float32 rounding of the float64 oracle.
  const Tensor x = sample({8, 9, 9, 16}, 998, 1002, DType::float32, 1);
  const Tensor ones = full({16}, 1.0, {.dtype = DType::float32});
  const Tensor zeros = full({16}, 0.0, {.dtype = DType::float32});
  const BatchNormOutput r = batch_norm_training(on_gpu(x), on_gpu(ones), on_gpu(zeros), 1e-3);
  const BatchNormOutput oracle = batch_norm_training(x.to(DType::float64), ones.to(DType::float64),
                                                     zeros.to(DType::float64), 1e-3);
  EXPECT_TRUE(all_close(on_cpu(r.variance).to(DType::float64), oracle.variance, {1e-4, 1e-6}));
  EXPECT_TRUE(all_close(on_cpu(r.mean).to(DType::float64), oracle.mean, {1e-6, 1e-6}));
}

TEST(GpuBatchNormTest, InferenceMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Shape shape{3, 4, 5, 6};
    const Tensor x = sample(shape, -2, 2, dtype, 1);
    const Tensor gamma = sample({6}, 0.5, 1.5, DType::float32, 2);
    const Tensor beta = sample({6}, -1, 1, DType::float32, 3);
    const Tensor mean = sample({6}, -0.5, 0.5, DType::float32, 4);
    const Tensor var = sample({6}, 0.5, 2, DType::float32, 5);
    std::vector<Tensor> cpu_in = {x.detach(), gamma.detach(), beta.detach()};
    for (Tensor& t : cpu_in) t.set_requires_grad(true);
    const std::vector<Tensor> gpu_in = {on_gpu(x, true), on_gpu(gamma, true), on_gpu(beta, true)};
    const Tensor y_cpu = batch_norm_inference(cpu_in[0], cpu_in[1], cpu_in[2], mean, var, 1e-3);
    const Tensor y_gpu =
        batch_norm_inference(gpu_in[0], gpu_in[1], gpu_in[2], on_gpu(mean), on_gpu(var), 1e-3);
    ASSERT_TRUE(matches(y_gpu, y_cpu, tolerance_for(dtype)));
    const Tensor weighting = sample(shape, 0.5, 1.5, dtype, 99);
    const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
    const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], scaled(tolerance_for(g_cpu[k].dtype()), 2)))
          << "gradient of input " << k;
    }
  }
}

void expect_fused_matches(const Shape& shape, DType dtype, UnaryOp act, bool training) {
  SCOPED_TRACE(shape.to_string() + " " + std::string(dtype_name(dtype)) + " " +
               std::string(op_name(act)) + (training ? " training" : " inference"));
  const std::int64_t c = shape[shape.rank() - 1];
  const Tensor x = sample(shape, -2, 2, dtype, 11);
  // A wide gamma so that relu6's upper kink is crossed too.
  const Tensor gamma = sample({c}, 0.5, 5, DType::float32, 12);
  const Tensor beta = sample({c}, -1, 1, DType::float32, 13);
  const Tensor mean = sample({c}, -0.5, 0.5, DType::float32, 14);
  const Tensor var = sample({c}, 0.5, 2, DType::float32, 15);
  std::vector<Tensor> cpu_in = {x.detach(), gamma.detach(), beta.detach()};
  for (Tensor& t : cpu_in) t.set_requires_grad(true);
  const std::vector<Tensor> gpu_in = {on_gpu(x, true), on_gpu(gamma, true), on_gpu(beta, true)};
  const double epsilon = 1e-3;
  const auto run = [&](const std::vector<Tensor>& in, bool gpu) {
    if (training) return ops::batch_norm_activation_training(in[0], in[1], in[2], epsilon, act).y;
    return ops::batch_norm_activation_inference(in[0], in[1], in[2], gpu ? on_gpu(mean) : mean,
                                                gpu ? on_gpu(var) : var, epsilon, act);
  };
  const Tensor y_cpu = run(cpu_in, false), y_gpu = run(gpu_in, true);
  ASSERT_TRUE(matches(y_gpu, y_cpu, scaled(tolerance_for(dtype), 4))) << "y";
  const Tensor weighting = sample(shape, 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_gpu.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(g_gpu[k].dtype(), cpu_in[k].dtype()) << "gradient " << k << " in its input's dtype";
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], scaled(tolerance_for(g_cpu[k].dtype()), 4)))
        << "gradient of input " << k;
  }
}

TEST(GpuBatchNormTest, FusedActivationMatchesTheCpuFusedKernels) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    for (UnaryOp act : {UnaryOp::relu, UnaryOp::relu6, UnaryOp::sigmoid, UnaryOp::silu}) {
      for (bool training : {true, false}) {
        expect_fused_matches({4, 5, 6, 7}, dtype, act, training);
        expect_fused_matches({33, 3}, dtype, act, training);
      }
    }
  }
}

TEST(GpuBatchNormTest, FusedActivationKeepsNaN) {
  MIXPREC_REQUIRE_GPU();
  // relu(NaN) is NaN in the fused op as in the unfused one: an overflow must reach the loss scaler.
  std::vector<float> values(12, 1.0f);
  values[5] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = on_gpu(from_vector(values, {4, 3}));
  const Tensor ones = on_gpu(full({3}, 1.0, {.dtype = DType::float32}));
  const Tensor zeros = on_gpu(full({3}, 0.0, {.dtype = DType::float32}));
  const Tensor mean = on_gpu(full({3}, 0.0, {.dtype = DType::float32}));
  const Tensor y =
      on_cpu(ops::batch_norm_activation_inference(x, ones, zeros, mean, ones, 1e-3, UnaryOp::relu));
  const std::vector<float> v = y.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[5]));
  EXPECT_FALSE(std::isnan(v[4]));
}

TEST(GpuBatchNormTest, LayerWithoutCenterOrScaleRunsWhereItsInputIs) {
  MIXPREC_REQUIRE_GPU();
  // The stand-ins for a missing beta or gamma are made on the input's device, not the default
  // one: a layer built on the GPU and called later outside the DeviceScope (another thread, or
  // after the scope ended) must not mix a CPU constant into a CUDA op.
  const Tensor x = sample({6, 4, 4, 3}, -2, 2, DType::float32, 5);
  for (bool center : {false, true}) {
    layers::BatchNormalization cpu_layer({.center = center, .scale = !center});
    layers::BatchNormalization gpu_layer({.center = center, .scale = !center});
    {
      DeviceScope on(kGpu);
      (void)gpu_layer(on_gpu(x), {.training = true});  // builds the variables on the GPU
    }
    (void)cpu_layer(x, {.training = true});
    for (bool training : {true, false}) {
      SCOPED_TRACE(std::string(center ? "no scale" : "no center") +
                   (training ? ", training" : ", inference"));
      const Tensor y_gpu = gpu_layer(on_gpu(x), {.training = training});
      EXPECT_TRUE(y_gpu.device() == kGpu);
      EXPECT_TRUE(matches(y_gpu, cpu_layer(x, {.training = training}), tolerance_for(kFloat32)));
    }
  }
}

TEST(GpuBatchNormTest, ErrorsNameTheProblem) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({4, 3}, -1, 1, DType::float32, 1));
  const Tensor g = on_gpu(sample({3}, -1, 1, DType::float32, 2));
  EXPECT_THROW(batch_norm_training(x, sample({3}, -1, 1, DType::float32, 3), g, 1e-3), DeviceError);
  EXPECT_THROW(batch_norm_training(x, on_gpu(sample({4}, -1, 1, DType::float32, 4)), g, 1e-3),
               ShapeError);
  EXPECT_THROW(batch_norm_training(x, g, g, 0.0), ValueError);
  EXPECT_THROW(batch_norm_training(on_gpu(sample({0, 3}, -1, 1, DType::float32, 5)), g, g, 1e-3),
               ValueError);
}

}  // namespace
}  // namespace mixprec::testing
