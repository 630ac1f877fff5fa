// The CUDA layer / RMS normalization kernels (kernels/layer_norm_kernels.cuh) run on the CPU by
// the host emulation (support/cuda_host_emulation.h) in layer_norm.cu's order and work split (one
// block per row; the column sums in layer_norm_parts parts), against the CPU backend
// (cpu/layer_norm.h) on the same inputs: the row statistics (the same double sums in another
// order, rounded to float: within 2 ulps), y and dx within the storage type's rounding plus a few
// float ulps of the row's scale, dgamma and dbeta within a float summation bound. Rows wider than a
// block (C = 300 > 256 threads) and narrower ones, several parts per column, float32, float16,
// bfloat16 and float64, with and without gamma/beta. The fused residual step's kernel
// (add_forward_kernel) gives the bits of the CPU add and forward_kernel composed. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/layer_norm.h"
#include "backend/cuda/layer_norm.h"
#include "backend/nn_kernels.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/layer_norm_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using layer_norm_kernels::Kind;

template <typename T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float16>) return DType::float16;
  if constexpr (std::is_same_v<T, bfloat16>) return DType::bfloat16;
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  return DType::float32;
}

struct Geometry {
  std::int64_t rows = 0, c = 0;
  bool params = true;
};

template <typename T>
void check_case(Kind kind, const Geometry& geo, std::uint32_t seed) {
  using P = compute_t<T>;
  const std::int64_t rows = geo.rows, c = geo.c, n = rows * c;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> x(n), dy(n), y(n, T(0)), dx(n, T(0));
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = from_compute<T>(static_cast<P>(2.0f + 1.5f * dist(gen)));  // off-centre rows
    dy[i] = from_compute<T>(static_cast<P>(dist(gen)));
  }
  std::vector<P> gamma(c), beta(c);
  for (std::int64_t j = 0; j < c; ++j) gamma[j] = 1 + dist(gen) / 2, beta[j] = dist(gen) / 2;
  const P* g = geo.params ? gamma.data() : nullptr;
  const P* b = geo.params ? beta.data() : nullptr;
  std::vector<P> mean(rows, P(-1)), rstd(rows, P(-1));
  const P eps = static_cast<P>(1e-3);
  // The launchers' work split: one block per row; parts * C column threads.
  run_grid(rows * kThreads, [&] {
    layer_norm_kernels::forward_kernel<T>(kind, x.data(), rows, c, g, b, eps, y.data(), mean.data(),
                                          rstd.data());
  });
  const std::int64_t parts = layer_norm_parts(rows, c);
  std::vector<P> partials(2 * parts * c, P(1e30)), dgamma(c, P(-7)), dbeta(c, P(-7));
  run_grid(rows * kThreads, [&] {
    layer_norm_kernels::backward_dx_kernel<T>(kind, dy.data(), x.data(), rows, c, g, mean.data(),
                                              rstd.data(), dx.data());
  });
  run_grid(block_grid(parts * c), [&] {
    layer_norm_kernels::column_partials_kernel<T>(kind, dy.data(), x.data(), rows, c, parts,
                                                  mean.data(), rstd.data(), partials.data());
  });
  run_grid(block_grid(c), [&] {
    layer_norm_kernels::column_finish_kernel<P>(kind, partials.data(), parts, c, dgamma.data(),
                                                dbeta.data());
  });

  // The CPU backend on the same values.
  const DType dtype = dtype_of<T>();
  const DType stat = dtype == DType::float64 ? DType::float64 : DType::float32;
  std::vector<double> xd(n), gd(n);
  for (std::int64_t i = 0; i < n; ++i) {
    xd[i] = static_cast<double>(to_compute(x[i]));
    gd[i] = static_cast<double>(to_compute(dy[i]));
  }
  const Tensor xs = from_vector(xd, Shape{rows, c}, {.dtype = DType::float64}).to(dtype);
  const Tensor gs = from_vector(gd, Shape{rows, c}, {.dtype = DType::float64}).to(dtype);
  const Tensor gamma_t = geo.params ? from_vector(std::vector<double>(gamma.begin(), gamma.end()),
                                                  Shape{c}, {.dtype = DType::float64})
                                          .to(stat)
                                    : Tensor();
  const Tensor beta_t = geo.params ? from_vector(std::vector<double>(beta.begin(), beta.end()),
                                                 Shape{c}, {.dtype = DType::float64})
                                         .to(stat)
                                   : Tensor();
  const RowNorm rk = kind == Kind::layer ? RowNorm::layer : RowNorm::rms;
  const RowNormResult cpu_fwd = cpu::row_norm_forward(rk, xs, gamma_t, beta_t, 1e-3);
  const RowNormGradients cpu_bwd =
      cpu::row_norm_backward(rk, gs, xs, gamma_t, cpu_fwd.mean, cpu_fwd.rstd);
  const auto cm = cpu_fwd.mean.to_vector<double>(), cr = cpu_fwd.rstd.to_vector<double>();
  const auto cy = cpu_fwd.y.to_vector<double>(), cdx = cpu_bwd.dx.to_vector<double>();
  const auto cdg = cpu_bwd.dgamma.to_vector<double>(), cdb = cpu_bwd.dbeta.to_vector<double>();
  // u: the statistics type's unit roundoff, times C for float64 storage, whose double row sums
  // (exact for float storage up to the final rounding) err by up to C u_64 in either order.
  const double u =
      unit_roundoff_of<P>() * (std::is_same_v<P, double> ? static_cast<double>(c) : 1.0);
  const double u_out = unit_roundoff_of<T>();
  const std::string what = std::string(dtype_name(dtype)) + " rows " + std::to_string(rows) +
                           " C " + std::to_string(c) + (kind == Kind::layer ? " layer" : " rms");
  for (std::int64_t i = 0; i < rows; ++i) {
    ASSERT_NEAR(static_cast<double>(mean[i]), cm[i], 4 * u * (std::abs(cm[i]) + 1)) << what << i;
    ASSERT_NEAR(static_cast<double>(rstd[i]), cr[i], 4 * u * cr[i]) << what << i;
  }
  for (std::int64_t e = 0; e < n; ++e) {
    const double yv = static_cast<double>(to_compute(y[e]));
    ASSERT_NEAR(yv, cy[e], 2 * u_out * std::abs(cy[e]) + 64 * u * (std::abs(cy[e]) + 1))
        << what << " y[" << e << "]";
    const double dv = static_cast<double>(to_compute(dx[e]));
    ASSERT_NEAR(dv, cdx[e], 2 * u_out * std::abs(cdx[e]) + 256 * u * (std::abs(cdx[e]) + 1))
        << what << " dx[" << e << "]";
  }
  // Each column sum is a float sum of runs of rows (the kernel's parts, the CPU's blocks of about
  // 2^14 / C rows) added in double: within (longest run + 8) u of the sum of magnitudes, which is
  // at most rows (1 + sqrt(C)) (|dy| <= 1, |xhat| <= sqrt(C)).
  const double rows_per_part = static_cast<double>((rows + parts - 1) / parts);
  const double cpu_block = std::max(1.0, std::floor(16384.0 / static_cast<double>(c)));
  for (std::int64_t j = 0; j < c; ++j) {
    const double bound = (rows_per_part + std::min(cpu_block, double(rows)) + 8) * u *
                         static_cast<double>(rows) * (1 + std::sqrt(static_cast<double>(c)));
    ASSERT_NEAR(static_cast<double>(dgamma[j]), cdg[j], bound) << what << " dgamma[" << j << "]";
    ASSERT_NEAR(static_cast<double>(dbeta[j]), cdb[j], bound) << what << " dbeta[" << j << "]";
  }
  // Every partial slot was written (none left poisoned).
  for (const P v : partials) ASSERT_LT(std::abs(static_cast<double>(v)), 1e29) << what;
}

template <typename T>
void check_all(std::uint32_t seed) {
  for (const Kind kind : {Kind::layer, Kind::rms}) {
    for (const Geometry& g : {Geometry{5, 300, true}, Geometry{37, 24, true}, Geometry{3, 1, true},
                              Geometry{9, 64, false}}) {
      check_case<T>(kind, g, seed++);
    }
  }
}

// The fused residual step's kernel (add_forward_kernel) against the CPU backend's add (the sum,
// the same bits: one rounding of the sum in P) and forward_kernel run on that sum in the same
// emulated order (y, mean and rstd: the same bits, as the model's fusion needs).
template <typename T>
void check_add_case(Kind kind, const Geometry& geo, std::uint32_t seed) {
  using P = compute_t<T>;
  const std::int64_t rows = geo.rows, c = geo.c, n = rows * c;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> a(n), b(n), sum(n, T(0)), y(n, T(0)), y_plain(n, T(0));
  for (std::int64_t i = 0; i < n; ++i) {
    a[i] = from_compute<T>(static_cast<P>(2.0f + 1.5f * dist(gen)));
    b[i] = from_compute<T>(static_cast<P>(dist(gen) / 3));  // a residual branch's small update
  }
  std::vector<P> gamma(c), beta(c);
  for (std::int64_t j = 0; j < c; ++j) gamma[j] = 1 + dist(gen) / 2, beta[j] = dist(gen) / 2;
  const P* g = geo.params ? gamma.data() : nullptr;
  const P* bt = geo.params ? beta.data() : nullptr;
  const P eps = static_cast<P>(1e-3);
  std::vector<P> mean(rows, P(-1)), rstd(rows, P(-1)), mean_plain(rows, P(-2)),
      rstd_plain(rows, P(-2));
  run_grid(rows * kThreads, [&] {
    layer_norm_kernels::add_forward_kernel<T>(kind, a.data(), b.data(), rows, c, g, bt, eps,
                                              sum.data(), y.data(), mean.data(), rstd.data());
  });
  // The CPU backend's add of the same values.
  const DType dtype = dtype_of<T>();
  std::vector<double> ad(n), bd(n);
  for (std::int64_t i = 0; i < n; ++i) {
    ad[i] = static_cast<double>(to_compute(a[i]));
    bd[i] = static_cast<double>(to_compute(b[i]));
  }
  const Tensor at = from_vector(ad, Shape{rows, c}, {.dtype = DType::float64}).to(dtype);
  const Tensor btt = from_vector(bd, Shape{rows, c}, {.dtype = DType::float64}).to(dtype);
  const std::vector<double> cpu_sum = mixprec::add(at, btt).to_vector<double>();
  std::vector<T> expected(n);
  for (std::int64_t i = 0; i < n; ++i) expected[i] = from_compute<T>(static_cast<P>(cpu_sum[i]));
  const std::string what = std::string(dtype_name(dtype)) + " rows " + std::to_string(rows) +
                           " C " + std::to_string(c) + (kind == Kind::layer ? " layer" : " rms");
  ASSERT_EQ(std::memcmp(sum.data(), expected.data(), n * sizeof(T)), 0) << what << " sum";
  run_grid(rows * kThreads, [&] {
    layer_norm_kernels::forward_kernel<T>(kind, expected.data(), rows, c, g, bt, eps,
                                          y_plain.data(), mean_plain.data(), rstd_plain.data());
  });
  ASSERT_EQ(std::memcmp(y.data(), y_plain.data(), n * sizeof(T)), 0) << what << " y";
  ASSERT_EQ(std::memcmp(mean.data(), mean_plain.data(), rows * sizeof(P)), 0) << what << " mean";
  ASSERT_EQ(std::memcmp(rstd.data(), rstd_plain.data(), rows * sizeof(P)), 0) << what << " rstd";
}

template <typename T>
void check_add_all(std::uint32_t seed) {
  for (const Kind kind : {Kind::layer, Kind::rms}) {
    for (const Geometry& g : {Geometry{5, 300, true}, Geometry{37, 24, true}, Geometry{3, 1, true},
                              Geometry{9, 64, false}}) {
      check_add_case<T>(kind, g, seed++);
    }
  }
}

TEST(CudaLayerNormEmulation, AddForwardEqualsAddThenForward) {
  check_add_all<float>(80);
  check_add_all<float16>(90);
  check_add_all<bfloat16>(100);
  check_add_all<double>(110);
}

TEST(CudaLayerNormEmulation, Float32) { check_all<float>(1); }
TEST(CudaLayerNormEmulation, Float16) { check_all<float16>(20); }
TEST(CudaLayerNormEmulation, BFloat16) { check_all<bfloat16>(40); }
TEST(CudaLayerNormEmulation, Float64) { check_all<double>(60); }

TEST(CudaLayerNormEmulation, PartsCoverEveryRow) {
  // Many rows: parts < rows, each column thread strides over its part's rows.
  EXPECT_LT(layer_norm_parts(100000, 768), 100000);
  EXPECT_EQ(layer_norm_parts(3, 768), 3);
  check_case<float>(Kind::layer, Geometry{700, 200, true}, 99);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
