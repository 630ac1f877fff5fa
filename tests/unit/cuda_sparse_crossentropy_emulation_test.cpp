// The CUDA sparse softmax crossentropy's kernels (kernels/sparse_crossentropy_kernels.cuh) run on
// the CPU by the host emulation (support/cuda_host_emulation.h): the rows pass (one warp per row,
// fewer warps than rows so the grid-stride loop wraps), the mean pass (one block) and the backward
// (grid-stride), in every storage type, with ignored rows, an all-ignored batch and an
// out-of-range label. No GPU needed.
//
// Oracle: long double. Per row, loss = lse(x) - x[label] with x the stored (rounded) logits. The
// kernel's error: exp of each term (the host's exp here; the GPU's is within 2 ulp), the double
// sum, log and the two subtractions in the compute type P, each a few units of P's roundoff u of
// the values involved: |loss - ref| <= 8 u (|x[label] - max| + |log s| + 1). The mean adds the
// rows in double and rounds once. The backward: p * scale (- scale at the label) with p from the
// stored statistics, then one rounding to T: within 8 u |scale| + u_T |ref|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "mixprec/mixprec.h"
// After every mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/sparse_crossentropy_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using sparse_crossentropy_kernels::backward_kernel;
using sparse_crossentropy_kernels::mean_kernel;
using sparse_crossentropy_kernels::rows_kernel;

constexpr std::int64_t kIgnore = -100;

struct Case {
  std::int64_t rows, classes;
  std::vector<std::int64_t> labels;
};

template <typename T>
void expect_case(const Case& c, std::uint32_t seed, double g_value) {
  using P = compute_t<T>;
  const double u = unit_roundoff_of<P>(), u_t = unit_roundoff_of<T>();
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-6.0f, 6.0f);
  std::vector<T> x(static_cast<std::size_t>(c.rows * c.classes));
  for (T& v : x) v = from_compute<T>(static_cast<P>(dist(gen)));
  const std::vector<std::int64_t>& y = c.labels;

  std::vector<P> loss(static_cast<std::size_t>(c.rows), P(1e30));  // poisoned
  std::vector<P> stats(static_cast<std::size_t>(2 * c.rows), P(1e30));
  // 2 warps for any number of rows: the warps loop over rows 0, 2, 4, ... and 1, 3, 5, ...
  run_grid(2 * kWarp, [&] {
    rows_kernel<T>(x.data(), y.data(), c.rows, c.classes, kIgnore, loss.data(), stats.data());
  });
  P mean = P(1e30), count = P(1e30);
  run_grid(kThreads,
           [&] { mean_kernel<P>(loss.data(), y.data(), c.rows, kIgnore, &mean, &count); });

  long double total = 0;
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    const std::size_t ri = static_cast<std::size_t>(r);
    if (y[ri] == kIgnore) {
      EXPECT_EQ(loss[ri], P(0)) << "row " << r;
      continue;
    }
    if (y[ri] < 0 || y[ri] >= c.classes) {
      EXPECT_TRUE(std::isnan(static_cast<double>(loss[ri]))) << "row " << r;
      continue;
    }
    long double m = -INFINITY, s = 0;
    for (std::int64_t k = 0; k < c.classes; ++k) {
      m = std::max<long double>(m, static_cast<double>(to_compute(x[ri * c.classes + k])));
    }
    for (std::int64_t k = 0; k < c.classes; ++k) {
      s += std::exp(static_cast<long double>(to_compute(x[ri * c.classes + k])) - m);
    }
    const long double xl = static_cast<double>(to_compute(x[ri * c.classes + y[ri]]));
    const long double ref = m + std::log(s) - xl;
    const double bound = 8 * u * static_cast<double>(std::abs(xl - m) + std::log(s) + 1);
    EXPECT_EQ(static_cast<double>(stats[2 * ri]), static_cast<double>(m)) << "row " << r;
    EXPECT_LE(std::abs(static_cast<double>(loss[ri]) - static_cast<double>(ref)), bound)
        << "row " << r;
    total += ref;
    ++kept;
  }
  const bool any_nan = std::any_of(y.begin(), y.end(), [&](std::int64_t v) {
    return v != kIgnore && (v < 0 || v >= c.classes);
  });
  EXPECT_EQ(static_cast<double>(count),
            static_cast<double>(
                std::count_if(y.begin(), y.end(), [](std::int64_t v) { return v != kIgnore; })));
  if (any_nan) {
    EXPECT_TRUE(std::isnan(static_cast<double>(mean)));
  } else if (kept == 0) {
    EXPECT_EQ(static_cast<double>(mean), 0.0);
  } else {
    const double ref = static_cast<double>(total / kept);
    EXPECT_NEAR(static_cast<double>(mean), ref, 16 * u * (std::abs(ref) + 20));
  }

  // Backward with g = g_value.
  const P g = static_cast<P>(g_value);
  std::vector<T> dx(x.size(), from_compute<T>(P(1e30)));
  run_grid(3 * kWarp, [&] {  // grid-stride: wraps many times
    backward_kernel<T>(x.data(), y.data(), c.rows, c.classes, kIgnore, stats.data(), &g, &count,
                       dx.data());
  });
  const double n = static_cast<double>(count);
  const double scale = n > 0 ? g_value / n : 0.0;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    const std::size_t ri = static_cast<std::size_t>(r);
    const bool ignored = y[ri] == kIgnore;
    const bool bad = !ignored && (y[ri] < 0 || y[ri] >= c.classes);
    long double m = -INFINITY, s = 0;
    for (std::int64_t k = 0; k < c.classes; ++k) {
      m = std::max<long double>(m, static_cast<double>(to_compute(x[ri * c.classes + k])));
    }
    for (std::int64_t k = 0; k < c.classes; ++k) {
      s += std::exp(static_cast<long double>(to_compute(x[ri * c.classes + k])) - m);
    }
    for (std::int64_t k = 0; k < c.classes; ++k) {
      const double got = static_cast<double>(to_compute(dx[ri * c.classes + k]));
      if (ignored) {
        ASSERT_EQ(got, 0.0) << "row " << r << " class " << k;
        continue;
      }
      if (bad) {
        ASSERT_TRUE(std::isnan(got)) << "row " << r << " class " << k;
        continue;
      }
      const long double p =
          std::exp(static_cast<long double>(to_compute(x[ri * c.classes + k])) - m) / s;
      const double ref = static_cast<double>((p - (k == y[ri] ? 1 : 0)) * scale);
      ASSERT_LE(std::abs(got - ref), 8 * u * std::abs(scale) + 1.01 * u_t * std::abs(ref))
          << "row " << r << " class " << k << ": " << got << " vs " << ref;
    }
  }
}

template <typename T>
void expect_all() {
  // Classes: fewer than a warp, not a multiple of 32, a few hundred.
  const std::vector<Case> cases = {
      {5, 7, {0, 6, kIgnore, 3, 2}},
      {6, 77, {76, kIgnore, kIgnore, 0, 40, 5}},
      {3, 300, {299, 1, 150}},
      {4, 40, {kIgnore, kIgnore, kIgnore, kIgnore}},  // everything ignored: 0, zero gradients
      {3, 33, {1, 33, 2}},                            // label 33 out of range: NaN, not an error
  };
  std::uint32_t seed = 7;
  for (const Case& c : cases) {
    expect_case<T>(c, seed++, 1.0);
    expect_case<T>(c, seed++, 0.375);  // a loss scale or a weight on the loss
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaSparseCrossentropyEmulationTest, Float32) { expect_all<float>(); }
TEST(CudaSparseCrossentropyEmulationTest, Float16) { expect_all<float16>(); }
TEST(CudaSparseCrossentropyEmulationTest, Bfloat16) { expect_all<bfloat16>(); }
TEST(CudaSparseCrossentropyEmulationTest, Float64) { expect_all<double>(); }

}  // namespace
}  // namespace mixprec::cuda::kernels
