// The register-resident CPU batch-norm loops (backend/cpu/batch_norm_activation_kernels.h,
// _sweeps.h, simd_convert.h): the in-register 16-bit conversions bit-exact with the scalar ones,
// the one-sweep statistics on data with |mean| >> std, every activation x storage type (channel
// counts with tails) against a float64 composition, the baseline and the widest compiled copies
// bit-identical, results independent of the thread count, and NaN propagation.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/batch_norm_activation.h"
#include "backend/cpu/batch_norm_activation_kernels.h"
#include "backend/cpu/simd_convert.h"
#include "mixprec/mixprec.h"
#include "mixprec/nn_ops.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::activation;
using testing::all_close;
using testing::normal;
using testing::Tolerance;

constexpr double kEps = 1e-3;
constexpr UnaryOp kActs[] = {UnaryOp::relu, UnaryOp::relu6, UnaryOp::sigmoid, UnaryOp::silu};
constexpr DType kStorage[] = {DType::float32, DType::float16, DType::bfloat16};

std::string what(DType dtype, UnaryOp act, std::int64_t c) {
  return std::string(dtype_name(dtype)) + " " + op_name(act) + " C=" + std::to_string(c);
}

// Every 16-bit pattern widens as the scalar conversion does (NaN payloads included).
TEST(BatchNormKernels, SixteenBitToFloatMatchesScalar) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float h = static_cast<float>(float16::from_bits(bits));
    const float f = static_cast<float>(bfloat16::from_bits(bits));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(cpu::simd::half_to_float(bits)),
              std::bit_cast<std::uint32_t>(h))
        << std::hex << b;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(cpu::simd::bf16_to_float(bits)),
              std::bit_cast<std::uint32_t>(f))
        << std::hex << b;
  }
}

// Float32 values round to 16 bits as the scalar conversion does: random bit patterns (NaN and inf
// included), ties, the overflow and subnormal boundaries.
TEST(BatchNormKernels, FloatToSixteenBitMatchesScalar) {
  std::vector<std::uint32_t> patterns = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                         0x7fc00000u, 0x7f800001u, 0xffc12345u, 0x477fefffu,
                                         0x477ff000u, 0x477fe000u, 0x38800000u, 0x387fffffu,
                                         0x33000000u, 0x33000001u, 0x3f808000u, 0x3f818000u};
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) patterns.push_back(static_cast<std::uint32_t>(rng()));
  // Values near the float16 range: every 13-bit rounding tail of some exponents.
  for (std::uint32_t e : {0x33u, 0x38u, 0x3fu, 0x47u}) {
    for (std::uint32_t m = 0; m < (1u << 16); ++m) patterns.push_back((e << 24) | (m << 7) | m);
  }
  for (std::uint32_t p : patterns) {
    const float v = std::bit_cast<float>(p);
    ASSERT_EQ(cpu::simd::float_to_half(v), float16(v).bits) << std::hex << p;
    ASSERT_EQ(cpu::simd::float_to_bf16(v), bfloat16(v).bits) << std::hex << p;
  }
}

// Mean 1e4, standard deviation 1 in float32 over many blocks (an uneven last one): the variance
// must match float64 on the same values (a float32 E[x^2] - E[x]^2 would lose it entirely).
TEST(BatchNormKernels, OneSweepStatisticsWithLargeOffset) {
  const Tensor x = normal({65541, 7}, 31, 1e4, 1.0);
  const Tensor gamma = ones({7}), beta = zeros({7});
  const auto r = cpu::batch_norm_activation_training(x, gamma, beta, kEps, UnaryOp::relu);
  const Tensor x64 = x.to(DType::float64);
  const Tensor mean64 = mean(x64, {0});
  const Tensor var64 = mean(mul(sub(x64, mean64), sub(x64, mean64)), {0});
  EXPECT_TRUE(all_close(r.mean, mean64, {1e-7, 0.0}));
  EXPECT_TRUE(all_close(r.variance, var64, {1e-5, 0.0}));
  // bfloat16 storage: mean 300, std 4 (the bfloat16 step at 300 is 2).
  const Tensor xb = normal({4099, 3, 5}, 32, 300.0, 4.0, DType::bfloat16);
  const auto rb =
      cpu::batch_norm_activation_training(xb, ones({5}), zeros({5}), kEps, UnaryOp::silu);
  const Tensor xb64 = reshape(xb.to(DType::float64), {-1, 5});
  const Tensor meanb = mean(xb64, {0});
  EXPECT_TRUE(all_close(rb.mean, meanb, {1e-7, 0.0}));
  EXPECT_TRUE(
      all_close(rb.variance, mean(mul(sub(xb64, meanb), sub(xb64, meanb)), {0}), {1e-5, 0.0}));
}

// The fused kernel against batch_norm + activation in float64 on the same (rounded) values:
// y, the statistics and the gradients of x, gamma and beta, channel counts with vector tails.
TEST(BatchNormKernels, EveryActivationAndStorageAgainstFloat64Composition) {
  for (const std::int64_t c : {1, 3, 17, 24, 40, 48}) {
    const Shape shape{6, 5, 7, c};
    for (DType dtype : kStorage) {
      for (UnaryOp act : kActs) {
        const Tensor x = normal(shape, 41, 0.7, 2.0, dtype);
        const Tensor dy = normal(shape, 42, 0.1, 1.0, dtype);
        const Tensor gamma = normal({c}, 43, 1.5, 1.0), beta = normal({c}, 44, 0.5, 2.0);
        const auto f = cpu::batch_norm_activation_training(x, gamma, beta, kEps, act);
        const auto g = cpu::batch_norm_activation_backward(dy, x, gamma, beta, f.mean, f.variance,
                                                           kEps, BatchNormStats::batch, act);
        const Tensor x64 = x.to(DType::float64).set_requires_grad(true);
        const Tensor g64 = gamma.to(DType::float64).set_requires_grad(true);
        const Tensor b64 = beta.to(DType::float64).set_requires_grad(true);
        const BatchNormOutput plain = batch_norm_training(x64, g64, b64, kEps);
        const Tensor y64 = activation(act, plain.y);
        const auto grads = grad(sum(mul(y64, dy.to(DType::float64))), {x64, g64, b64});
        const std::string w = what(dtype, act, c);
        const Tolerance out =
            dtype == DType::float32 ? Tolerance{2e-5, 2e-5} : testing::tolerance_for(dtype);
        const Tolerance sums{2e-5, 1e-4};
        EXPECT_TRUE(all_close(f.mean, plain.mean, {1e-6, 1e-6})) << w;
        EXPECT_TRUE(all_close(f.variance, plain.variance, {1e-5, 1e-6})) << w;
        EXPECT_TRUE(all_close(f.y, y64, out)) << w << " y";
        EXPECT_TRUE(all_close(g.dx, grads[0], {out.rtol, std::max(out.atol, 2 * out.rtol)}))
            << w << " dx";
        EXPECT_TRUE(all_close(g.dgamma, grads[1], sums)) << w << " dgamma";
        EXPECT_TRUE(all_close(g.dbeta, grads[2], sums)) << w << " dbeta";
      }
    }
  }
}

// Everything one call produces, as float64 values (for exact comparisons).
std::vector<std::vector<double>> run_all(const Tensor& x, const Tensor& dy, UnaryOp act) {
  const std::int64_t c = x.dim(-1);
  const Tensor gamma = normal({c}, 53, 1.5, 1.0), beta = normal({c}, 54, 0.5, 2.0);
  const auto f = cpu::batch_norm_activation_training(x, gamma, beta, kEps, act);
  std::vector<std::vector<double>> out{f.y.to_vector<double>(), f.mean.to_vector<double>(),
                                       f.variance.to_vector<double>()};
  for (BatchNormStats stats : {BatchNormStats::batch, BatchNormStats::moving}) {
    const auto g = cpu::batch_norm_activation_backward(dy, x, gamma, beta, f.mean, f.variance, kEps,
                                                       stats, act);
    for (const Tensor* t : {&g.dx, &g.dgamma, &g.dbeta}) out.push_back(t->to_vector<double>());
  }
  return out;
}

void expect_identical(const std::vector<std::vector<double>>& a,
                      const std::vector<std::vector<double>>& b, const std::string& w) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      ASSERT_EQ(std::bit_cast<std::uint64_t>(a[i][j]), std::bit_cast<std::uint64_t>(b[i][j]))
          << w << " output " << i << " element " << j;
    }
  }
}

// The baseline copies (SSE2) and the widest the CPU runs (AVX-512 here) round every operation
// alike: bit-identical results, on enough rows for several blocks.
TEST(BatchNormKernels, BaselineAndWideCopiesAgree) {
  for (DType dtype : kStorage) {
    for (UnaryOp act : kActs) {
      const Tensor x = normal({8, 23, 19, 24}, 61, 0.3, 2.5, dtype);
      const Tensor dy = normal({8, 23, 19, 24}, 62, 0.0, 1.0, dtype);
      const auto wide = run_all(x, dy, act);
      cpu::bn_kernels::force_baseline(true);
      const auto base = run_all(x, dy, act);
      cpu::bn_kernels::force_baseline(false);
      expect_identical(wide, base, what(dtype, act, 24));
    }
  }
}

// The fixed row blocking: one thread and two give the same bits.
TEST(BatchNormKernels, IndependentOfThreadCount) {
  const int threads = omp_get_max_threads();
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    const Tensor x = normal({16, 33, 31, 40}, 71, -2.0, 3.0, dtype);
    const Tensor dy = normal({16, 33, 31, 40}, 72, 0.0, 1.0, dtype);
    omp_set_num_threads(1);
    const auto one = run_all(x, dy, UnaryOp::silu);
    omp_set_num_threads(2);
    const auto two = run_all(x, dy, UnaryOp::silu);
    omp_set_num_threads(threads);
    expect_identical(one, two, std::string(dtype_name(dtype)));
  }
}

// A NaN in x makes its channel's statistics NaN, so that channel's y, dx and dgamma are NaN (dbeta
// too for the smooth activations) and the other channels stay finite.
TEST(BatchNormKernels, NaNInInputPropagatesThroughItsChannel) {
  const std::int64_t c = 19, nan_channel = 5;
  for (DType dtype : kStorage) {
    for (UnaryOp act : kActs) {
      std::vector<float> values = normal({50, c}, 81, 0.2, 1.0).to_vector<float>();
      values[static_cast<std::size_t>(17 * c + nan_channel)] = std::nanf("");
      const Tensor x = from_vector(values, {50, c}).to(dtype);
      const Tensor dy = normal({50, c}, 82, 0.0, 1.0, dtype);
      const auto f = cpu::batch_norm_activation_training(x, ones({c}), zeros({c}), kEps, act);
      const auto g = cpu::batch_norm_activation_backward(
          dy, x, ones({c}), zeros({c}), f.mean, f.variance, kEps, BatchNormStats::batch, act);
      const std::vector<float> y = f.y.to_vector<float>(), dx = g.dx.to_vector<float>();
      const std::string w = what(dtype, act, c);
      EXPECT_TRUE(std::isnan(f.mean.to_vector<float>()[nan_channel])) << w;
      EXPECT_TRUE(std::isnan(g.dgamma.to_vector<float>()[nan_channel])) << w;
      // relu' and relu6' are 0 at NaN (comparisons are false): dz is 0 there, so dbeta = sum(dz)
      // stays finite; the sigmoid's derivative is NaN.
      const bool smooth = act == UnaryOp::sigmoid || act == UnaryOp::silu;
      EXPECT_EQ(std::isnan(g.dbeta.to_vector<float>()[nan_channel]), smooth) << w;
      for (std::int64_t i = 0; i < 50 * c; ++i) {
        const bool in_channel = i % c == nan_channel;
        const auto k = static_cast<std::size_t>(i);
        ASSERT_EQ(std::isnan(y[k]), in_channel) << w << " y " << i;
        ASSERT_EQ(std::isnan(dx[k]), in_channel) << w << " dx " << i;
      }
    }
  }
}

}  // namespace
}  // namespace mixprec
