// dense_forward on CUDA (cuBLASLt with BIAS / GELU_(AUX_)BIAS epilogues forward, relu and exact
// gelu as ops after the product, and BGRADA on the dW product backward) against the CPU composition
// act(x W + b) evaluated in float32 from the same values: x in its dtype, the float32 master kernel
// and bias rounded to that dtype (what the GPU multiplies), rounded once to the dtype at the end.
// That is the epilogue's own definition (the bias is added to the float32 accumulator before the
// one rounding). Shapes with extents that are not multiples of 8, rank-3 inputs, with and without a
// bias, the fused path and the unfused fallback, float32 / float16 / bfloat16; a mixed_float16
// Dense layer made on the GPU; the fused path taken for aligned shapes; NaN through every
// activation (relu included: cuBLASLt's RELU epilogue would drop it); BGRADA's sums.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/matmul.h"
#include "gpu/op_harness.h"
#include "ops/dense_op.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/summation_bound.h"

namespace mixprec::testing {
namespace {

const char* name_of(DenseActivation a) {
  switch (a) {
    case DenseActivation::linear: return "linear";
    case DenseActivation::relu: return "relu";
    case DenseActivation::gelu: return "gelu";
    case DenseActivation::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

Tensor activate(DenseActivation a, const Tensor& z) {
  switch (a) {
    case DenseActivation::linear: return z;
    case DenseActivation::relu: return relu(z);
    case DenseActivation::gelu: return gelu(z, GeluApproximation::none);
    case DenseActivation::gelu_tanh: return gelu(z, GeluApproximation::tanh);
  }
  return z;
}

// Restores the fused mode when a test leaves.
struct EpilogueModeGuard {
  explicit EpilogueModeGuard(cuda::detail::EpilogueMode mode) {
    cuda::detail::set_epilogue_mode(mode);
  }
  ~EpilogueModeGuard() { cuda::detail::set_epilogue_mode(cuda::detail::EpilogueMode::fused); }
};

// Positive x and mostly positive weights keep cancellation (which the 16-bit rounding of dz before
// the backward products would amplify) out of the comparison: x W is about 0.17 K on average, and
// the bias in [-3.5, 0.5] puts a good share of the pre-activations below zero so that relu and
// gelu bend.
struct Inputs {
  Tensor x, w, b, upstream;  // x and upstream in dtype; w, b float32 masters
};

Inputs make_inputs(const Shape& x_shape, std::int64_t n, DType dtype) {
  const std::int64_t k = x_shape[x_shape.rank() - 1];
  std::vector<std::int64_t> y_dims(x_shape.begin(), x_shape.end());
  y_dims.back() = n;
  return {sample(x_shape, 0.0, 1.0, dtype, 31), sample(Shape{k, n}, -0.3, 1.0, kFloat32, 32),
          sample(Shape{n}, -3.5, 0.5, kFloat32, 33), sample(Shape(y_dims), 0.5, 1.5, dtype, 34)};
}

struct Outputs {
  Tensor y, dx, dw, db;
};

Outputs run_gpu(const Inputs& in, DenseActivation act, bool with_bias) {
  const Tensor x = on_gpu(in.x, true), w = on_gpu(in.w, true);
  const Tensor b = with_bias ? on_gpu(in.b, true) : Tensor();
  const Tensor y = dense_forward(x, w, b, act);
  std::vector<Tensor> vars = {x, w};
  if (with_bias) vars.push_back(b);
  const std::vector<Tensor> g = grad(y, vars, on_gpu(in.upstream));
  return {y.detach(), g[0], g[1], with_bias ? g[2] : Tensor()};
}

// The CPU composition in float32 on the values the GPU multiplies.
Outputs run_reference(const Inputs& in, DenseActivation act, bool with_bias, DType dtype) {
  Tensor x = in.x.to(kFloat32), w = in.w.to(dtype).to(kFloat32), b = in.b.to(dtype).to(kFloat32);
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  Tensor z = matmul(x, w);
  if (with_bias) z = add(z, b);
  const Tensor y = activate(act, z);
  std::vector<Tensor> vars = {x, w};
  if (with_bias) vars.push_back(b);
  const std::vector<Tensor> g = grad(y, vars, in.upstream.to(kFloat32));
  // dx in x's dtype; dW and db reach the float32 masters in float32.
  return {y.detach().to(dtype), g[0].to(dtype), g[1], with_bias ? g[2] : Tensor()};
}

// Forward tolerances (tests/gpu/TOLERANCES.md):
// float32: cuBLASLt's and oneDNN's summation orders differ by a few ulp over K (as in
// matmul_test): (1e-5, 1e-5). gelu_tanh in float32 shares it: cuBLASLt's GELU epilogue evaluates
// tanh within ~1e-6 of the CPU's tanhf (measured on the first H100 run).
// 16-bit: the forward rounds once (fused: the float32 accumulator, bias and activation, with no
// split-K algorithm that rounds the product first, matmul_plan.h's reduction_scheme_mask; unfused:
// the fallback keeps the product, bias and activation in float32, matmul.cpp), so the dtype's
// tolerance (exact gelu: 2x, the gelu op rounds once more).
Tolerance forward_tolerance(DType dtype, DenseActivation act) {
  if (dtype == kFloat32) return {1e-5, 1e-5};
  return scaled(tolerance_for(dtype), act == DenseActivation::gelu ? 2.0 : 1.0);
}
// float32 backward: the summation orders and float32 evaluations of act' only: (2e-5, 2e-5).
Tolerance backward_tolerance_float32() { return {2e-5, 2e-5}; }

// ---- the 16-bit backward's error bound ----
// The GPU's backward (dense_op.cpp) rounds dz = dy * act'(z) to the dtype before the dW and dx
// products and, for gelu and gelu_tanh, evaluates act' at z rounded to the dtype (the epilogue's
// aux output, or the gelu op's 16-bit input); run_reference keeps z and dz in float32. Every term
// of dW = x^T dz, dx = dz W^T and db = sum_rows(dz) then carries an error of up to u16 of its own
// size, and the sums cancel (dz changes sign where gelu bends), so a tolerance relative to the
// result is no oracle: the first H100 run's dW 0.0113548 vs 0.0160948 (bfloat16 gelu_tanh, z
// still rounded twice then) is 30% of the value but 0.18 of the bound below. The bound,
// elementwise, from the inputs in float64 (u: the dtype's unit roundoff, u32 = 2^-24):
//   e_z  = u |z| + 4 (K + 2) u32 (sum_k |x_k| |w_k| + |b|): z as the GPU reads it (rounded once to
//          the dtype) against the reference's float32 z (two float32 sums of K + 1 terms)
//   d_dz = u |dz| + (1 + u) (0.8 |dy| e_z + 64 u32 |dy|) + floor     gelu, gelu_tanh
//          |dy| where |z| <= e_z, else 0                              relu (act' may flip there)
//          0                                                          linear (dz = dy, exact)
//     0.8 >= max |gelu''| = 2 phi(0) = 0.7979 (both forms); 64 u32 |dy| covers both sides'
//     float32 evaluation of act' (|act'| <= 1.13, a few ulps each)
//   dW <= sum_m |x_m| d_dz_m + 4 (M + 2) u32 sum_m |x_m| |dz_m|      (float32, no rounding)
//   db <= sum_m d_dz_m + 4 (M + 2) u32 sum_m |dz_m|
//   dx <= (1 + u) (D + 2 u |dx|) + 2 floor, D = sum_n d_dz_n |w_n| + 4 (N + 2) u32 sum |dz_n| |w_n|
//          (each side rounds its dx to the dtype once)
// The constant 4 is 2 per float32 sum and side: tensor cores align the products to the largest
// and truncate (Fasi, Higham, Mikaitis, Pranesh 2021), twice round-to-nearest's (n + 1) u32.
struct BoundInputs {
  std::int64_t m = 0, k = 0, n = 0;
  std::vector<double> x, w, b, dy;  // (M, K), (K, N), (N,), (M, N): the values both sides use
};

BoundInputs bound_inputs(const Inputs& in, bool with_bias, DType dtype) {
  BoundInputs v;
  v.k = in.w.dim(0), v.n = in.w.dim(1), v.m = in.x.numel() / v.k;
  v.x = in.x.to_vector<double>();
  v.w = in.w.to(dtype).to_vector<double>();
  v.b = with_bias ? in.b.to(dtype).to_vector<double>() : std::vector<double>(v.n, 0.0);
  v.dy = in.upstream.to_vector<double>();
  return v;
}

double act_slope(DenseActivation a, double z) {
  const double pi = 3.14159265358979323846;
  switch (a) {
    case DenseActivation::linear: return 1.0;
    case DenseActivation::relu: return z > 0 ? 1.0 : 0.0;
    case DenseActivation::gelu:
      return 0.5 * std::erfc(-z / std::sqrt(2.0)) + z * std::exp(-0.5 * z * z) / std::sqrt(2 * pi);
    case DenseActivation::gelu_tanh: {
      const double c = std::sqrt(2.0 / pi), t = std::tanh(c * (z + 0.044715 * z * z * z));
      return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z);
    }
  }
  return 1.0;
}

// |dz| and d_dz (above), (M, N).
struct DzBound {
  std::vector<double> dz_abs, error;
};

DzBound dz_bound(const BoundInputs& v, DenseActivation act, DType dtype) {
  const double u = unit_roundoff(dtype), u32 = std::ldexp(1.0, -24);
  const double floor = subnormal_floor(dtype);
  DzBound d{std::vector<double>(v.m * v.n), std::vector<double>(v.m * v.n)};
  for (std::int64_t i = 0; i < v.m; ++i) {
    for (std::int64_t j = 0; j < v.n; ++j) {
      double z = v.b[j], mag = std::abs(v.b[j]);
      for (std::int64_t l = 0; l < v.k; ++l) {
        z += v.x[i * v.k + l] * v.w[l * v.n + j];
        mag += std::abs(v.x[i * v.k + l] * v.w[l * v.n + j]);
      }
      const double e_z = u * std::abs(z) + 4.0 * double(v.k + 2) * u32 * mag + floor;
      const double dy = std::abs(v.dy[i * v.n + j]);
      const double dz = dy * std::abs(act_slope(act, z));
      double error = 0.0;
      if (act == DenseActivation::relu) error = std::abs(z) <= e_z ? dy : 0.0;
      if (act == DenseActivation::gelu || act == DenseActivation::gelu_tanh)
        error = u * dz + (1 + u) * (0.8 * dy * e_z + 64 * u32 * dy) + floor;
      d.dz_abs[i * v.n + j] = dz;
      d.error[i * v.n + j] = error;
    }
  }
  return d;
}

struct BackwardBounds {
  std::vector<double> dx, dw, db;
};

// The bounds above for dx (M, K) against the reference's dx, dW (K, N) and db (N,).
BackwardBounds backward_bounds(const Inputs& in, DenseActivation act, bool with_bias, DType dtype,
                               const Tensor& ref_dx) {
  const BoundInputs v = bound_inputs(in, with_bias, dtype);
  const DzBound d = dz_bound(v, act, dtype);
  const double u = unit_roundoff(dtype), u32 = std::ldexp(1.0, -24);
  const double floor = subnormal_floor(dtype);
  BackwardBounds r{std::vector<double>(v.m * v.k, 0.0), std::vector<double>(v.k * v.n, 0.0),
                   std::vector<double>(v.n, 0.0)};
  const std::vector<double> dx = ref_dx.to_vector<double>();
  for (std::int64_t i = 0; i < v.m; ++i) {
    for (std::int64_t l = 0; l < v.k; ++l) {
      double carried = 0.0, mag = 0.0;
      for (std::int64_t j = 0; j < v.n; ++j) {
        const double w = std::abs(v.w[l * v.n + j]);
        carried += d.error[i * v.n + j] * w;
        mag += d.dz_abs[i * v.n + j] * w;
      }
      const double sum = carried + 4.0 * double(v.n + 2) * u32 * mag;
      r.dx[i * v.k + l] = (1 + u) * (sum + 2 * u * std::abs(dx[i * v.k + l])) + 2 * floor;
    }
  }
  for (std::int64_t j = 0; j < v.n; ++j) {
    for (std::int64_t l = 0; l < v.k; ++l) {
      double carried = 0.0, mag = 0.0;
      for (std::int64_t i = 0; i < v.m; ++i) {
        const double x = std::abs(v.x[i * v.k + l]);
        carried += x * d.error[i * v.n + j];
        mag += x * d.dz_abs[i * v.n + j];
      }
      r.dw[l * v.n + j] = carried + 4.0 * double(v.m + 2) * u32 * mag;
    }
    double carried = 0.0, mag = 0.0;
    for (std::int64_t i = 0; i < v.m; ++i) {
      carried += d.error[i * v.n + j];
      mag += d.dz_abs[i * v.n + j];
    }
    r.db[j] = carried + 4.0 * double(v.m + 2) * u32 * mag;
  }
  return r;
}

// The GPU result (device, dtype, values) against the reference within the elementwise bound.
::testing::AssertionResult matches_within(const Tensor& gpu, const Tensor& cpu,
                                          const std::vector<double>& bound) {
  if (!gpu.defined() || !(gpu.device() == kGpu) || gpu.dtype() != cpu.dtype()) {
    return ::testing::AssertionFailure()
           << (gpu.defined()
                   ? std::string(dtype_name(gpu.dtype())) + " on " + gpu.device().to_string()
                   : std::string("undefined"))
           << ", expected " << dtype_name(cpu.dtype()) << " on cuda:0";
  }
  return within_bound(on_cpu(gpu), cpu, bound);
}

// The backward against the reference: float32 within its tolerance, 16-bit within the bound.
void expect_backward_matches(const Inputs& in, DenseActivation act, bool with_bias, DType dtype,
                             const Outputs& gpu, const Outputs& ref) {
  if (dtype == kFloat32) {
    EXPECT_TRUE(matches(gpu.dx, ref.dx, backward_tolerance_float32())) << "dx";
    EXPECT_TRUE(matches(gpu.dw, ref.dw, backward_tolerance_float32())) << "dW";
    if (with_bias) EXPECT_TRUE(matches(gpu.db, ref.db, backward_tolerance_float32())) << "db";
    return;
  }
  const BackwardBounds bound = backward_bounds(in, act, with_bias, dtype, ref.dx);
  if (gpu.dx.defined()) EXPECT_TRUE(matches_within(gpu.dx, ref.dx, bound.dx)) << "dx";
  EXPECT_TRUE(matches_within(gpu.dw, ref.dw, bound.dw)) << "dW";
  if (with_bias) EXPECT_TRUE(matches_within(gpu.db, ref.db, bound.db)) << "db";
}

void expect_matches_cpu(const Shape& x_shape, std::int64_t n, DType dtype, DenseActivation act,
                        bool with_bias) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + name_of(act) + " x " + x_shape.to_string() +
               " N " + std::to_string(n) + (with_bias ? " with bias" : " no bias"));
  const Inputs in = make_inputs(x_shape, n, dtype);
  const Outputs gpu = run_gpu(in, act, with_bias);
  const Outputs ref = run_reference(in, act, with_bias, dtype);
  EXPECT_TRUE(matches(gpu.y, ref.y, forward_tolerance(dtype, act))) << "forward";
  expect_backward_matches(in, act, with_bias, dtype, gpu, ref);
}

const DenseActivation kActivations[] = {DenseActivation::linear, DenseActivation::relu,
                                        DenseActivation::gelu, DenseActivation::gelu_tanh};

void expect_all_match(cuda::detail::EpilogueMode mode) {
  EpilogueModeGuard guard(mode);
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    for (DenseActivation act : kActivations) {
      for (bool with_bias : {true, false}) {
        expect_matches_cpu(Shape{37, 21}, 19, dtype, act, with_bias);    // M, K, N odd
        expect_matches_cpu(Shape{3, 5, 13}, 11, dtype, act, with_bias);  // rank 3
      }
    }
  }
}

TEST(GpuDenseEpilogueTest, FusedMatchesTheCpuComposition) {
  MIXPREC_REQUIRE_GPU();
  expect_all_match(cuda::detail::EpilogueMode::fused);
}

TEST(GpuDenseEpilogueTest, UnfusedFallbackMatchesTheCpuComposition) {
  MIXPREC_REQUIRE_GPU();
  expect_all_match(cuda::detail::EpilogueMode::unfused);
}

TEST(GpuDenseEpilogueTest, MixedFloat16DenseLayerOnTheGpu) {
  MIXPREC_REQUIRE_GPU();
  // The layer (float32 master variables made on the GPU) goes through dense_forward's fused path;
  // its output and the float32 gradients of its variables match the CPU composition. The inputs
  // and the reference are made on the CPU, outside the DeviceScope (which would put them on the
  // GPU too: the reference would then mix devices).
  PolicyGuard policy("mixed_float16");
  const Inputs values = make_inputs(Shape{2, 9, 21}, 19, kFloat16);  // rank 3, on the CPU
  Tensor y, kernel, bias;
  std::vector<Tensor> g;
  {
    DeviceScope on(kGpu);  // the layer makes its variables on the default device
    set_seed(3);
    layers::Dense d(19, {.activation = "relu", .bias_initializer = "random_normal"});
    y = d(on_gpu(values.x.to(kFloat32)));  // autocast to float16: exact
    kernel = d.kernel(), bias = d.bias();
    g = grad(y, {kernel, bias}, on_gpu(values.upstream));
  }
  ASSERT_EQ(y.dtype(), kFloat16);
  ASSERT_EQ(kernel.dtype(), kFloat32);
  ASSERT_TRUE(kernel.device() == kGpu && bias.device() == kGpu) << "the layer ignored DeviceScope";
  const Inputs layer_values = {values.x, on_cpu(kernel), on_cpu(bias), values.upstream};
  const Outputs ref = run_reference(layer_values, DenseActivation::relu, true, kFloat16);
  EXPECT_TRUE(matches(y, ref.y, forward_tolerance(kFloat16, DenseActivation::relu)));
  expect_backward_matches(layer_values, DenseActivation::relu, true, kFloat16,
                          {Tensor(), Tensor(), g[0], g[1]}, ref);  // no dx: x is no variable
}

TEST(GpuDenseEpilogueTest, AlignedShapesTakeTheFusedPath) {
  MIXPREC_REQUIRE_GPU();
  // Extents that are multiples of 8 and 256-byte-aligned buffers: cuBLASLt has epilogue kernels
  // for these; a fallback here means the epilogue is not in use (look at the heuristic's answer).
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    for (DenseActivation act : kActivations) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + name_of(act));
      const Inputs in = make_inputs(Shape{64, 128}, 256, dtype);
      const std::int64_t before = cuda::matmul_cache_stats().epilogue_fallbacks;
      {
        NoGradScope no_grad;  // inference epilogues
        dense_forward(on_gpu(in.x), on_gpu(in.w), on_gpu(in.b), act);
      }
      run_gpu(in, act, true);  // training: the AUX forward and BGRADA on dW
      EXPECT_EQ(cuda::matmul_cache_stats().epilogue_fallbacks, before);
    }
  }
}

TEST(GpuDenseEpilogueTest, InferenceAndTrainingForwardsAgree) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat16, kBFloat16}) {
    const Inputs in = make_inputs(Shape{29, 40}, 24, dtype);
    Tensor inference;
    {
      NoGradScope no_grad;  // GELU_BIAS
      inference =
          dense_forward(on_gpu(in.x), on_gpu(in.w), on_gpu(in.b), DenseActivation::gelu_tanh);
    }
    const Outputs training = run_gpu(in, DenseActivation::gelu_tanh, true);  // GELU_AUX_BIAS
    EXPECT_TRUE(all_close(on_cpu(inference), on_cpu(training.y), tolerance_for(dtype)));
  }
}

TEST(GpuDenseEpilogueTest, NanPropagatesThroughReluLikeOnTheCpu) {
  MIXPREC_REQUIRE_GPU();
  // Loss scaling finds overflow through non-finite values; relu(NaN) must stay NaN on CUDA as it
  // does on the CPU (cuBLASLt's RELU epilogue, x := max(x, 0), would return 0 and hide a NaN from
  // the step check: dense_forward runs the relu op after the product). The other activations, in
  // inference and training (GELU_AUX_BIAS) form, must keep it too.
  std::vector<float> xv(4 * 8, 0.5f);
  xv[8] = std::numeric_limits<float>::quiet_NaN();  // row 1
  const Tensor x = from_vector(xv, Shape{4, 8}).to(kFloat16);
  const Tensor w = sample(Shape{8, 16}, -1.0, 1.0, kFloat32, 5);
  const Tensor b = sample(Shape{16}, -1.0, 1.0, kFloat32, 6);
  for (DenseActivation act : kActivations) {
    for (bool training : {false, true}) {
      SCOPED_TRACE(std::string(name_of(act)) + (training ? " training" : " inference"));
      const Tensor cpu_y = dense_forward(x, w, b, act);
      const Tensor gpu_y = dense_forward(on_gpu(x), on_gpu(w, training), on_gpu(b), act);
      const std::vector<float> c = cpu_y.to(kFloat32).to_vector<float>();
      const std::vector<float> g = on_cpu(gpu_y).to(kFloat32).to_vector<float>();
      ASSERT_EQ(c.size(), g.size());
      std::size_t nans = 0;
      for (std::size_t i = 0; i < c.size(); ++i) {
        EXPECT_EQ(std::isnan(c[i]), std::isnan(g[i])) << "element " << i;
        nans += std::isnan(c[i]) ? 1 : 0;
      }
      EXPECT_EQ(nans, 16u) << "row 1 is NaN on the CPU";
    }
  }
}

TEST(GpuDenseEpilogueTest, MatmulEpilogueChecksItsBias) {
  MIXPREC_REQUIRE_GPU();
  const Tensor a = on_gpu(sample(Shape{4, 6}, 0.0, 1.0, kFloat16, 1));
  const Tensor b = on_gpu(sample(Shape{6, 5}, 0.0, 1.0, kFloat16, 2));
  expect_error<ValueError>(
      [&] {
        cuda::matmul_epilogue(a, b, Transpose::no, Transpose::no, kFloat16, Epilogue::relu_bias,
                              on_gpu(sample(Shape{5}, 0.0, 1.0, kFloat32, 3)));
      },
      {"bias of shape (5,)", "float16"});
  expect_error<ValueError>(
      [&] {
        cuda::matmul_epilogue(a, b, Transpose::no, Transpose::no, kFloat16, Epilogue::relu,
                              on_gpu(sample(Shape{5}, 0.0, 1.0, kFloat16, 3)));
      },
      {"does not add one"});
}

TEST(GpuDenseEpilogueTest, BiasGradientEpilogueSumsTheColumns) {
  MIXPREC_REQUIRE_GPU();
  // dW = x^T dz with db = sum over rows of dz, directly against CPU sums.
  for (DType dtype : {kFloat16, kBFloat16, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = sample(Shape{45, 13}, 0.0, 1.0, dtype, 7);
    const Tensor dz = sample(Shape{45, 19}, 0.0, 1.0, dtype, 8);
    const EpilogueResult r = cuda::matmul_epilogue(on_gpu(x), on_gpu(dz), Transpose::yes,
                                                   Transpose::no, kFloat32, Epilogue::bias_grad);
    const Tensor x32 = x.to(kFloat32), dz32 = dz.to(kFloat32);
    EXPECT_TRUE(all_close(on_cpu(r.out), matmul(x32, dz32, Transpose::yes), {1e-5, 1e-5}));
    EXPECT_TRUE(all_close(on_cpu(r.bias_grad), sum(dz32, {0}), {1e-5, 1e-5}));
  }
}

}  // namespace
}  // namespace mixprec::testing
