// The CUDA batch-normalization kernels (kernels/batch_norm_kernels.cuh) run on the CPU by the host
// emulation (support/cuda_host_emulation.h) in the order batch_norm.cu launches them, with its
// work split (batch_norm_parts, both vector widths): training forward (partial sums, mean, variance
// and scale, normalize) and backward (partial sums of dy and dy (x - mean), coefficients, dx).
// Shapes give both many parts per channel (the finishing block adds thousands) and fewer parts than
// threads. No GPU needed. The fused batch normalization + activation (relu, relu6, sigmoid, silu)
// likewise.
//
// Oracle: the formulas in long double over the same rounded inputs (biased variance, as the CPU).
// The statistics within the rigorous bound of a float summation of each part's k rows, 1.01 (k + 1)
// u M (M the sum of the magnitudes, the double finish and one rounding to float inside it); y and
// dx, which combine several such values, within u_T |ref| + 64 u32 (|ref| + 1): an indexing or
// ordering bug gives errors of order one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/batch_norm.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/batch_norm_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using batch_norm_kernels::Activation;
using batch_norm_kernels::backward_coefficients_kernel;
using batch_norm_kernels::backward_dx_kernel;
using batch_norm_kernels::Identity;
using batch_norm_kernels::mean_kernel;
using batch_norm_kernels::normalize_kernel;
using batch_norm_kernels::partial_sums_kernel;
using batch_norm_kernels::scale_kernel;
using batch_norm_kernels::Sums;

::testing::AssertionResult near(const char* what, std::int64_t i, double got, double ref,
                                double bound) {
  if (std::abs(got - ref) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << "[" << i << "]: " << got << " vs " << ref << " (bound " << bound << ")";
}

// The reference activation and its derivative in long double; relu and relu6 take their
// derivative's branch from the kernel's own float pre-activation (an exact pre-activation on the
// other side of the kink would differ by the whole gradient, which says nothing about indexing).
struct Reference {
  std::optional<UnaryOp> act;
  long double value(long double pre) const {
    if (!act) return pre;
    return kernel_math::unary_value(*act, static_cast<double>(pre));
  }
  long double derivative(long double pre, double pre_kernel) const {
    if (!act) return 1;
    if (*act == UnaryOp::relu || *act == UnaryOp::relu6) {
      return kernel_math::unary_derivative(*act, pre_kernel, 0.0);
    }
    const double v = static_cast<double>(pre);
    return kernel_math::unary_derivative(*act, v, kernel_math::unary_value(*act, v));
  }
};

// One case's inputs and everything the kernels write.
template <typename T>
struct Case {
  using P = compute_t<T>;
  std::int64_t rows = 0, channels = 0, parts = 0;
  double eps = 1e-3;
  std::vector<T> x, dy, y, dx;
  std::vector<P> gamma, beta, partials, mean, variance, scale, coefficients, dgamma, dbeta;

  Case(DType dtype, std::int64_t r, std::int64_t c, std::uint32_t seed)
      : rows(r), channels(c), parts(batch_norm_parts(dtype, r, c)) {
    const std::int64_t total = rows * channels;
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    x.resize(total), dy.resize(total), y.resize(total), dx.resize(total);
    for (std::int64_t i = 0; i < total; ++i) {
      x[i] = from_compute<T>(static_cast<P>(3.0f + dist(gen)));  // off-centre: |mean| > std
      dy[i] = from_compute<T>(static_cast<P>(dist(gen)));
    }
    gamma.resize(channels), beta.resize(channels);
    // relu6's upper kink needs pre-activations above 6: a few channels get a large gamma.
    for (std::int64_t k = 0; k < channels; ++k) {
      gamma[k] = (k % 4 == 3 ? 8 : 1) + dist(gen), beta[k] = dist(gen);
    }
    partials.assign(2 * parts * channels, P(1e30));  // poisoned: every read slot is written
    mean.resize(channels), variance.resize(channels), scale.resize(channels);
    coefficients.resize(3 * channels), dgamma.resize(channels), dbeta.resize(channels);
  }
};

// The training forward and the backward with batch statistics, in batch_norm.cu's order and work
// split (the fused activation's backward from the forward's scale and beta): V values per vector
// with 32-bit indices (the launchers' vector path) or V = 1 with 64-bit ones.
template <typename T, typename Act, int V>
void run_kernels(Case<T>& k) {
  using P = compute_t<T>;
  using I = std::conditional_t<V == 1, std::int64_t, std::int32_t>;
  const std::int64_t rows = k.rows, channels = k.channels, parts = k.parts;
  const std::int64_t total = rows * channels;
  const std::int64_t sums_grid = block_grid(parts * (channels / V));
  const std::int64_t finish_grid = channels * kThreads;  // one block per channel
  run_grid(sums_grid, [&] {
    partial_sums_kernel<T, Sums::x, Identity, V>(k.x.data(), nullptr, nullptr, rows, channels,
                                                 parts, k.partials.data(), nullptr, nullptr);
  });
  run_grid(finish_grid,
           [&] { mean_kernel<P>(k.partials.data(), parts, channels, rows, k.mean.data()); });
  run_grid(sums_grid, [&] {
    partial_sums_kernel<T, Sums::squared_deviation, Identity, V>(
        k.x.data(), nullptr, k.mean.data(), rows, channels, parts, k.partials.data(), nullptr,
        nullptr);
  });
  run_grid(finish_grid, [&] {
    scale_kernel<P>(k.partials.data(), parts, channels, rows, k.variance.data(), k.gamma.data(),
                    static_cast<P>(k.eps), k.scale.data());
  });
  run_grid(7 * kWarp, [&] {
    normalize_kernel<T, I, Act, V>(k.x.data(), k.mean.data(), k.scale.data(), k.beta.data(),
                                   static_cast<I>(total), static_cast<I>(channels), k.y.data());
  });
  run_grid(sums_grid, [&] {
    partial_sums_kernel<T, Sums::gradient, Act, V>(k.x.data(), k.dy.data(), k.mean.data(), rows,
                                                   channels, parts, k.partials.data(),
                                                   k.scale.data(), k.beta.data());
  });
  run_grid(finish_grid, [&] {
    backward_coefficients_kernel<P>(k.partials.data(), parts, channels, rows, k.variance.data(),
                                    k.gamma.data(), static_cast<P>(k.eps), true,
                                    k.coefficients.data(), k.dgamma.data(), k.dbeta.data());
  });
  run_grid(7 * kWarp, [&] {
    backward_dx_kernel<T, I, Act, V>(k.dy.data(), k.x.data(), k.mean.data(), k.coefficients.data(),
                                     static_cast<I>(total), static_cast<I>(channels), k.dx.data(),
                                     k.scale.data(), k.beta.data());
  });
}

// Channel c of a run against the reference, in long double (64-bit significand on x86-64: far
// more exact than float64 storage's sums).
template <typename T>
void expect_channel(const Case<T>& k, std::int64_t c, const Reference& ref) {
  const std::int64_t rows = k.rows, channels = k.channels;
  // Each part's k rows, then the finish: parts / 32 per lane and 5 butterfly steps (in double: it
  // counts only for float64 storage).
  const double terms =
      static_cast<double>((rows + k.parts - 1) / k.parts + (k.parts + 31) / 32 + 6);
  const double u = unit_roundoff_of<compute_t<T>>();
  const double sum_bound = 1.01 * terms * u, u_out = unit_roundoff_of<T>();
  // A smooth activation's derivative is evaluated at the kernel's float pre-activation, a few ulps
  // from the exact one, with the float math library: a relative error of some u32 per term.
  const double term_error = ref.act ? 64 * std::ldexp(1.0, -24) : 0.0;
  const auto value = [](T v) { return static_cast<double>(to_compute(v)); };
  const auto at = [&](std::int64_t r) { return r * channels + c; };
  long double sx = 0, ax = 0, sd = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    sx += value(k.x[at(r)]), ax += std::abs(value(k.x[at(r)]));
  const long double ml = sx / rows;
  for (std::int64_t r = 0; r < rows; ++r) sd += (value(k.x[at(r)]) - ml) * (value(k.x[at(r)]) - ml);
  const long double var = sd / rows, inv = 1 / std::sqrt(var + static_cast<long double>(k.eps));
  const auto pre_kernel = [&](std::int64_t i) {  // the kernels' own float expression
    return static_cast<double>((to_compute(k.x[i]) - k.mean[c]) * k.scale[c] + k.beta[c]);
  };
  const auto pre_exact = [&](std::int64_t i) {
    return (value(k.x[i]) - ml) * inv * k.gamma[c] + k.beta[c];
  };
  long double sg = 0, ag = 0, sgx = 0, agx = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const long double d = value(k.x[at(r)]) - ml;
    const long double g = value(k.dy[at(r)]) * ref.derivative(pre_exact(at(r)), pre_kernel(at(r)));
    sg += g, ag += std::abs(g), sgx += g * d, agx += std::abs(g * d);
  }
  const double m = static_cast<double>(ml), v = static_cast<double>(var);
  const double inv_d = static_cast<double>(inv), ag_d = static_cast<double>(ag);
  ASSERT_TRUE(near("mean", c, k.mean[c], m, sum_bound * ax / rows + u * std::abs(m)));
  // The kernel's variance also carries the mean's error e: sum (d - e)^2 / rows = var + e^2.
  const double e = sum_bound * ax / rows + u * std::abs(m);
  ASSERT_TRUE(near("variance", c, k.variance[c], v, sum_bound * v + e * e + 4 * u * v));
  ASSERT_TRUE(
      near("dbeta", c, k.dbeta[c], static_cast<double>(sg), (sum_bound + term_error) * ag_d));
  const double dgamma = static_cast<double>(sgx * inv);
  ASSERT_TRUE(near("dgamma", c, k.dgamma[c], dgamma,
                   ((sum_bound + term_error) * static_cast<double>(agx) + 2 * e * ag_d) * inv_d +
                       64 * u * std::abs(dgamma)));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = at(r);
    const long double d = value(k.x[i]) - ml, pre = pre_exact(i);
    const double y_ref = static_cast<double>(ref.value(pre));
    const long double dz = value(k.dy[i]) * ref.derivative(pre, pre_kernel(i));
    const double dx_ref =
        static_cast<double>(k.gamma[c] * inv * (dz - sg / rows - d * sgx * inv * inv / rows));
    ASSERT_TRUE(near("y", i, value(k.y[i]), y_ref,
                     u_out * std::abs(y_ref) + 64 * u * (std::abs(static_cast<double>(pre)) + 1)));
    ASSERT_TRUE(near("dx", i, value(k.dx[i]), dx_ref,
                     u_out * std::abs(dx_ref) +
                         (64 * u + term_error) * (std::abs(dx_ref) + k.gamma[c] * inv_d + 1)));
  }
}

// Act: the kernels' Identity or Activation<A>; act the same for the reference. Both vector widths
// the launchers use: 16 bytes of channels where C allows, and single channels.
template <typename T, typename Act>
void expect_batch_norm(DType dtype, std::int64_t rows, std::int64_t channels, std::uint32_t seed,
                       std::optional<UnaryOp> act) {
  constexpr int kVector = 16 / sizeof(T);
  const Reference ref{act};
  for (int width : {kVector, 1}) {
    if (width == kVector && channels % kVector != 0) continue;
    Case<T> k(dtype, rows, channels, seed);
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " rows " + std::to_string(rows) + " channels " +
                 std::to_string(channels) + ", " + std::to_string(k.parts) + " parts, vector " +
                 std::to_string(width) + ", activation " +
                 (act ? std::string(op_name(*act)) : std::string("none")));
    width == 1 ? run_kernels<T, Act, 1>(k) : run_kernels<T, Act, kVector>(k);
    for (std::int64_t c = 0; c < channels; ++c) {
      expect_channel<T>(k, c, ref);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

template <typename T>
void expect_all(DType dtype) {
  // (rows, channels): thousands of parts per channel (capped at the rows); 50 parts; 5 parts
  // (most threads of the finishing block idle); 64 and 256 parts of one row each; 9000 rows in
  // 8192 parts (the cap: parts of one and two rows); an odd channel count (no vectors).
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {3000, 16}, {50, 40}, {5, 3}, {64, 4096}, {256, 2048}, {9000, 8}, {700, 7}};
  std::uint32_t seed = 1;
  for (const auto& [rows, channels] : shapes) {
    expect_batch_norm<T, Identity>(dtype, rows, channels, seed++, std::nullopt);
  }
}

// The fused activations (not for float64, which composes them), on two shapes.
template <typename T>
void expect_fused(DType dtype) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{3000, 16}, {50, 40}, {90, 7}};
  std::uint32_t seed = 100;
  for (const auto& [rows, channels] : shapes) {
    expect_batch_norm<T, Activation<UnaryOp::relu>>(dtype, rows, channels, seed++, UnaryOp::relu);
    expect_batch_norm<T, Activation<UnaryOp::relu6>>(dtype, rows, channels, seed++, UnaryOp::relu6);
    expect_batch_norm<T, Activation<UnaryOp::sigmoid>>(dtype, rows, channels, seed++,
                                                       UnaryOp::sigmoid);
    expect_batch_norm<T, Activation<UnaryOp::silu>>(dtype, rows, channels, seed++, UnaryOp::silu);
  }
}

TEST(CudaBatchNormEmulationTest, Float32MatchesTheFormulas) { expect_all<float>(DType::float32); }
TEST(CudaBatchNormEmulationTest, Float16MatchesTheFormulas) { expect_all<float16>(DType::float16); }
TEST(CudaBatchNormEmulationTest, Bfloat16MatchesTheFormulas) {
  expect_all<bfloat16>(DType::bfloat16);
}
TEST(CudaBatchNormEmulationTest, Float64MatchesTheFormulas) { expect_all<double>(DType::float64); }
TEST(CudaBatchNormEmulationTest, FusedActivationsMatchTheFormulas) {
  expect_fused<float>(DType::float32);
  expect_fused<float16>(DType::float16);
  expect_fused<bfloat16>(DType::bfloat16);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
