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
using batch_norm_kernels::gradient_sums_kernel;
using batch_norm_kernels::Identity;
using batch_norm_kernels::moments_kernel;
using batch_norm_kernels::normalize_kernel;
using batch_norm_kernels::statistics_kernel;

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

// A case's geometry: parts 0 takes the launchers' batch_norm_parts; others give long parts (many
// rows per Welford run, uneven part sizes). x is drawn from offset + [-1, 1).
struct Geometry {
  std::int64_t rows = 0, channels = 0, parts = 0;
  float offset = 3.0f;  // off-centre: |mean| > std
};

// One case's inputs and everything the kernels write.
template <typename T>
struct Case {
  using P = compute_t<T>;
  std::int64_t rows = 0, channels = 0, parts = 0;
  double eps = 1e-3;
  std::vector<T> x, dy, y, dx;
  std::vector<P> gamma, beta, partials, mean, variance, coefficients, dgamma, dbeta;

  Case(DType dtype, const Geometry& g, std::uint32_t seed)
      : rows(g.rows),
        channels(g.channels),
        parts(g.parts > 0 ? g.parts : batch_norm_parts(dtype, g.rows, g.channels)) {
    const std::int64_t total = rows * channels;
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    x.resize(total), dy.resize(total), y.resize(total), dx.resize(total);
    for (std::int64_t i = 0; i < total; ++i) {
      x[i] = from_compute<T>(static_cast<P>(g.offset + dist(gen)));
      dy[i] = from_compute<T>(static_cast<P>(dist(gen)));
    }
    gamma.resize(channels), beta.resize(channels);
    // relu6's upper kink needs pre-activations above 6: a few channels get a large gamma.
    for (std::int64_t k = 0; k < channels; ++k) {
      gamma[k] = (k % 4 == 3 ? 8 : 1) + dist(gen), beta[k] = dist(gen);
    }
    partials.assign(2 * parts * channels, P(1e30));  // poisoned: every read slot is written
    mean.resize(channels), variance.resize(channels);
    coefficients.resize(3 * channels), dgamma.resize(channels), dbeta.resize(channels);
  }
};

// The training forward and the backward with batch statistics, in batch_norm.cu's order and work
// split (the fused activation's backward from the forward's statistics and beta): V values per
// vector (the launchers' vector path) or V = 1.
template <typename T, typename Act, int V>
void run_kernels(Case<T>& k) {
  using P = compute_t<T>;
  const std::int64_t rows = k.rows, channels = k.channels, parts = k.parts;
  const P eps = static_cast<P>(k.eps);
  const std::int64_t sums_grid = block_grid(parts * (channels / V));
  const std::int64_t elementwise_parts = batch_norm_elementwise_parts(channels / V, rows);
  const std::int64_t elementwise_grid = block_grid(elementwise_parts * (channels / V));
  const std::int64_t finish_grid = channels * kThreads;  // one block per channel
  run_grid(sums_grid,
           [&] { moments_kernel<T, V>(k.x.data(), rows, channels, parts, k.partials.data()); });
  run_grid(finish_grid, [&] {
    statistics_kernel<P>(k.partials.data(), parts, channels, rows, k.mean.data(),
                         k.variance.data());
  });
  run_grid(elementwise_grid, [&] {
    normalize_kernel<T, Act, V>(k.x.data(), k.mean.data(), k.variance.data(), k.gamma.data(),
                                k.beta.data(), eps, rows, channels, elementwise_parts, k.y.data());
  });
  run_grid(sums_grid, [&] {
    gradient_sums_kernel<T, Act, V>(k.x.data(), k.dy.data(), k.mean.data(), k.variance.data(),
                                    k.gamma.data(), k.beta.data(), eps, rows, channels, parts,
                                    k.partials.data());
  });
  run_grid(finish_grid, [&] {
    backward_coefficients_kernel<P>(k.partials.data(), parts, channels, rows, k.variance.data(),
                                    k.gamma.data(), eps, true, k.coefficients.data(),
                                    k.dgamma.data(), k.dbeta.data());
  });
  run_grid(elementwise_grid, [&] {
    backward_dx_kernel<T, Act, V>(k.dy.data(), k.x.data(), k.mean.data(), k.coefficients.data(),
                                  k.beta.data(), rows, channels, elementwise_parts, k.dx.data());
  });
}

// Bounds on the kernel's statistics of one channel (moments_kernel + statistics_kernel), for k
// rows per part at most, the channel's range R = max x - min x, max |x| and variance var; u the
// unit roundoff of the float statistics type, u_fin that of the double finish. Welford's
// recurrence on x' = x - s (s a sample, so |x'| <= R) over n <= k rows: each step's rounding of
// the running mean is damped by (1 - 1/n) afterwards, so the mean's error is at most the sum of
// the steps' roundings, u (|m_n| + 3 |x' - m_{n-1}| / n) <= u R (1 + 6 / n), plus the rounding of
// x' itself: E' = u R (k + 6 H_k + 1), H_k <= ln k + 1. Each M2 step rounds by u |q_n| + 3 u R^2,
// x' by u R (2 R per row), and the mean's error E' moves each product by 2 E' R: per part
// u k Q_p + u R^2 (5 k) + 2 k E' R; over all parts, divided by the rows,
// u (k var + R^2 (2 k + 12 H_k + 7)). The finish adds each part's mean rounded to float
// (u max|x|), so the total mean error E = E' + u max|x| + u |mean|, which moves Chan's
// n_p (m_p - mu)^2 terms by at most 2 R E + E^2; the variance's final rounding u var; and the
// double sums of the finish, (parts / 256 + 14) u_fin times the magnitudes.
struct StatisticBounds {
  double mean = 0, variance = 0;
};
StatisticBounds statistic_bounds(double k, double parts, double range, double max_abs, double mean,
                                 double var, double u) {
  const double u_fin = 0x1p-53, h = std::log(k) + 1, finish = (parts / 256 + 14) * u_fin;
  const double e_welford = u * range * (k + 6 * h + 1);
  StatisticBounds b;
  b.mean = e_welford + u * max_abs + u * std::abs(mean) + finish * max_abs;
  b.variance = u * (k * var + range * range * (2 * k + 12 * h + 7)) + 2 * range * b.mean +
               b.mean * b.mean + u * var + finish * (var + range * range);
  return b;
}

// Channel c of a run against the reference, in long double (64-bit significand on x86-64: far
// more exact than float64 storage's sums).
template <typename T>
void expect_channel(const Case<T>& k, std::int64_t c, const Reference& ref) {
  using P = compute_t<T>;
  const std::int64_t rows = k.rows, channels = k.channels;
  const double rows_per_part = static_cast<double>((rows + k.parts - 1) / k.parts);
  // The gradient sums: each part's k rows, then the finish: parts / 256 per thread, 5 butterfly
  // steps and 8 warps (in double: it counts only for float64 storage).
  const double terms = rows_per_part + static_cast<double>(k.parts + 255) / 256 + 14;
  const double u = unit_roundoff_of<P>();
  const double sum_bound = 1.01 * terms * u, u_out = unit_roundoff_of<T>();
  // A smooth activation's derivative is evaluated at the kernel's float pre-activation, a few ulps
  // from the exact one, with the float math library: a relative error of some u32 per term.
  const double term_error = ref.act ? 64 * std::ldexp(1.0, -24) : 0.0;
  const auto value = [](T v) { return static_cast<double>(to_compute(v)); };
  const auto at = [&](std::int64_t r) { return r * channels + c; };
  long double sx = 0, sd = 0;
  double lo = value(k.x[at(0)]), hi = lo, max_abs = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double xv = value(k.x[at(r)]);
    sx += xv, lo = std::min(lo, xv), hi = std::max(hi, xv),
              max_abs = std::max(max_abs, std::abs(xv));
  }
  const long double ml = sx / rows;
  for (std::int64_t r = 0; r < rows; ++r) sd += (value(k.x[at(r)]) - ml) * (value(k.x[at(r)]) - ml);
  const long double var = sd / rows, inv = 1 / std::sqrt(var + static_cast<long double>(k.eps));
  const double m = static_cast<double>(ml), v = static_cast<double>(var);
  const StatisticBounds stat =
      statistic_bounds(rows_per_part, static_cast<double>(k.parts), hi - lo, max_abs, m, v, u);
  ASSERT_TRUE(near("mean", c, k.mean[c], m, stat.mean));
  ASSERT_TRUE(near("variance", c, k.variance[c], v, stat.variance));
  // The statistics' errors through the normalization: the mean's e moves (x - mean) by e; the
  // variance's relative error r_var moves 1 / sqrt(var + eps) by r_var / 2 (relative), and the
  // backward's b = sum(dz d) inv^2 / rows by about r_var.
  const double e = stat.mean, r_var = 1.01 * stat.variance / (v + k.eps);
  const P scale = batch_norm_kernels::scale_of(k.variance[c], k.gamma[c], static_cast<P>(k.eps));
  const auto pre_kernel = [&](std::int64_t i) {  // the kernels' own float expression
    return static_cast<double>((to_compute(k.x[i]) - k.mean[c]) * scale + k.beta[c]);
  };
  const auto pre_exact = [&](std::int64_t i) {
    return (value(k.x[i]) - ml) * inv * k.gamma[c] + k.beta[c];
  };
  const double gamma_inv = k.gamma[c] * static_cast<double>(inv);
  // |pre_kernel - pre_exact| from the statistics alone; a smooth activation's derivative moves by
  // at most 0.5 (|silu''| <= 0.5, |sigmoid''| < 0.1) times that.
  const auto pre_error = [&](double d) { return gamma_inv * (e + std::abs(d) * r_var / 2) * 1.01; };
  const double slope = ref.act && *ref.act != UnaryOp::relu && *ref.act != UnaryOp::relu6 ? 0.5 : 0;
  long double sg = 0, ag = 0, sgx = 0, agx = 0, a_dy_pre = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const long double d = value(k.x[at(r)]) - ml;
    const long double g = value(k.dy[at(r)]) * ref.derivative(pre_exact(at(r)), pre_kernel(at(r)));
    sg += g, ag += std::abs(g), sgx += g * d, agx += std::abs(g * d);
    a_dy_pre += std::abs(value(k.dy[at(r)])) * slope * pre_error(static_cast<double>(d)) *
                (std::abs(static_cast<double>(d)) + e);
  }
  const double inv_d = static_cast<double>(inv), ag_d = static_cast<double>(ag);
  // dbeta: the sum's rounding, plus each dz moved by the derivative's shift.
  double dbeta_shift = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double d = value(k.x[at(r)]) - m;
    dbeta_shift += std::abs(value(k.dy[at(r)])) * slope * pre_error(d);
  }
  ASSERT_TRUE(near("dbeta", c, k.dbeta[c], static_cast<double>(sg),
                   (sum_bound + term_error) * ag_d + dbeta_shift));
  const double dgamma = static_cast<double>(sgx * inv);
  const double sgx_error = (sum_bound + term_error) * static_cast<double>(agx) + e * ag_d +
                           static_cast<double>(a_dy_pre);
  ASSERT_TRUE(near("dgamma", c, k.dgamma[c], dgamma,
                   sgx_error * inv_d + (64 * u + r_var) * std::abs(dgamma)));
  const double a_ref = static_cast<double>(sg / rows);
  const double b_ref = static_cast<double>(sgx * inv * inv / rows);
  const double a_error = (sum_bound + term_error) * ag_d / rows + dbeta_shift / rows;
  const double b_error =
      sgx_error * inv_d * inv_d / rows + (64 * u + 1.01 * r_var) * std::abs(b_ref);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = at(r);
    const long double d = value(k.x[i]) - ml, pre = pre_exact(i);
    const double d_d = static_cast<double>(d), pre_d = static_cast<double>(pre);
    const double y_ref = static_cast<double>(ref.value(pre));
    const long double dz = value(k.dy[i]) * ref.derivative(pre, pre_kernel(i));
    const double dz_d = static_cast<double>(dz);
    const double dx_ref =
        static_cast<double>(k.gamma[c] * inv * (dz - sg / rows - d * sgx * inv * inv / rows));
    // y: the activation is 1.1-Lipschitz (silu), the others at most 1.
    ASSERT_TRUE(
        near("y", i, value(k.y[i]), y_ref,
             u_out * std::abs(y_ref) + 64 * u * (std::abs(pre_d) + 1) + 1.1 * pre_error(d_d)));
    // dx = k (dz - a - d b): k relative r_var / 2; dz by the derivative's shift; a and b by their
    // sums' bounds; d by e.
    const double inner = std::abs(dz_d - a_ref - d_d * b_ref);
    const double inner_error = std::abs(value(k.dy[i])) * slope * pre_error(d_d) + a_error +
                               std::abs(d_d) * b_error + e * std::abs(b_ref);
    ASSERT_TRUE(near("dx", i, value(k.dx[i]), dx_ref,
                     u_out * std::abs(dx_ref) +
                         (64 * u + term_error) * (std::abs(dx_ref) + gamma_inv + 1) +
                         gamma_inv * (r_var / 2 * inner + inner_error) * 1.01));
  }
}

// Act: the kernels' Identity or Activation<A>; act the same for the reference. Both vector widths
// the launchers use: 16 bytes of channels where C allows, and single channels.
template <typename T, typename Act>
void expect_batch_norm(DType dtype, const Geometry& g, std::uint32_t seed,
                       std::optional<UnaryOp> act) {
  constexpr int kVector = 16 / sizeof(T);
  const Reference ref{act};
  for (int width : {kVector, 1}) {
    if (width == kVector && g.channels % kVector != 0) continue;
    Case<T> k(dtype, g, seed);
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " rows " + std::to_string(g.rows) + " channels " +
                 std::to_string(g.channels) + ", " + std::to_string(k.parts) + " parts, offset " +
                 std::to_string(g.offset) + ", vector " + std::to_string(width) + ", activation " +
                 (act ? std::string(op_name(*act)) : std::string("none")));
    width == 1 ? run_kernels<T, Act, 1>(k) : run_kernels<T, Act, kVector>(k);
    for (std::int64_t c = 0; c < g.channels; ++c) {
      expect_channel<T>(k, c, ref);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

template <typename T>
void expect_all(DType dtype) {
  // The launchers' parts: thousands of parts per channel (capped at the rows); 50 parts; 5 parts
  // (most threads of the finishing block idle); 64 and 256 parts of one row each; 9000 rows in
  // 8192 parts (the cap: parts of one and two rows); an odd channel count (no vectors). Then long
  // Welford runs: 7 parts of 428 or 429 rows; one part of 1000 rows; 13 uneven parts with a mean
  // 300 standard deviations from zero.
  const std::vector<Geometry> shapes = {
      {3000, 16}, {50, 40}, {5, 3},        {64, 4096},    {256, 2048},
      {9000, 8},  {700, 7}, {3000, 16, 7}, {1000, 24, 1}, {777, 40, 13, 200.0f}};
  std::uint32_t seed = 1;
  for (const Geometry& g : shapes) {
    expect_batch_norm<T, Identity>(dtype, g, seed++, std::nullopt);
  }
}

// The fused activations (not for float64, which composes them), on four shapes.
template <typename T>
void expect_fused(DType dtype) {
  const std::vector<Geometry> shapes = {{3000, 16}, {50, 40}, {90, 7}, {2000, 8, 3}};
  std::uint32_t seed = 100;
  for (const Geometry& g : shapes) {
    expect_batch_norm<T, Activation<UnaryOp::relu>>(dtype, g, seed++, UnaryOp::relu);
    expect_batch_norm<T, Activation<UnaryOp::relu6>>(dtype, g, seed++, UnaryOp::relu6);
    expect_batch_norm<T, Activation<UnaryOp::sigmoid>>(dtype, g, seed++, UnaryOp::sigmoid);
    expect_batch_norm<T, Activation<UnaryOp::silu>>(dtype, g, seed++, UnaryOp::silu);
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
