// The CUDA column sums (kernels/column_sums_kernels.cuh: the sum over the middle axis of
// (outer, length, cols), bias gradients and global average pooling) run on the CPU by the host
// emulation (support/cuda_host_emulation.h) with reduce.cu's work split (column_sum_parts) and
// both vector widths, and other splits that make long parts (several float runs per thread).
// Oracle: the sum in long double over the same stored values, times the scale; the kernels add
// float runs of at most kRun values folded into double, so |got - ref| <= kRun u_C sum|x| |scale|
// (a float run of k terms errs at most (k - 1) u_C times the sum of their magnitudes; the double
// folds and the finish add about 2^-53 relative) plus one rounding to the storage type. Partials
// start as NaN: a slot the first pass does not write poisons its output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/launch.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/column_sums_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using column_sums_kernels::column_finish_kernel;
using column_sums_kernels::column_partials_kernel;
using column_sums_kernels::kRun;

struct Geometry {
  std::int64_t outer = 1, length = 1, cols = 1;
  std::int64_t parts = 0;  // 0: the launcher's column_sum_parts
};

template <typename T, int V>
void expect_column_sums(DType dtype, const Geometry& g, double scale, std::uint32_t seed) {
  using C = compute_t<T>;
  const std::int64_t parts =
      g.parts > 0 ? g.parts : column_sum_parts(dtype, g.outer, g.length, g.cols);
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " (" + std::to_string(g.outer) + ", " +
               std::to_string(g.length) + ", " + std::to_string(g.cols) + "), " +
               std::to_string(parts) + " parts, vector " + std::to_string(V));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 3.0f);  // off-centre: the sums grow
  std::vector<T> x(static_cast<std::size_t>(g.outer * g.length * g.cols));
  for (T& v : x) v = from_compute<T>(static_cast<C>(dist(gen)));
  const std::int64_t outputs = g.outer * g.cols;
  std::vector<double> partials(static_cast<std::size_t>(outputs * parts),
                               std::numeric_limits<double>::quiet_NaN());
  std::vector<T> out(static_cast<std::size_t>(outputs));
  run_grid(block_grid(g.outer * parts * (g.cols / V)), [&] {
    column_partials_kernel<T, V>(x.data(), g.outer, g.length, g.cols, parts, partials.data());
  });
  run_grid(block_grid(outputs * kWarp),
           [&] { column_finish_kernel<T>(partials.data(), outputs, parts, scale, out.data()); });
  const double u = unit_roundoff_of<C>(), u_out = unit_roundoff_of<T>();
  for (std::int64_t o = 0; o < g.outer; ++o) {
    for (std::int64_t c = 0; c < g.cols; ++c) {
      long double sum = 0, magnitude = 0;
      for (std::int64_t r = 0; r < g.length; ++r) {
        const double v = static_cast<double>(
            to_compute(x[static_cast<std::size_t>((o * g.length + r) * g.cols + c)]));
        sum += v, magnitude += std::abs(v);
      }
      const double ref = static_cast<double>(sum * scale);
      const double got =
          static_cast<double>(to_compute(out[static_cast<std::size_t>(o * g.cols + c)]));
      const double bound = (kRun * u + 0x1p-50) * static_cast<double>(magnitude) * std::abs(scale) +
                           1.01 * u_out * std::abs(ref);
      ASSERT_LE(std::abs(got - ref), bound)
          << "output (" << o << ", " << c << "): " << got << " vs " << ref;
    }
  }
}

template <typename T>
void expect_all(DType dtype) {
  constexpr int kVector = static_cast<int>(16 / sizeof(T));
  // A bias gradient (outer 1, thousands of rows); global average pooling (outer 4, 49 rows,
  // mean); fewer rows than one part wants (a single part); odd columns (no vectors); parts that
  // hold several float runs each (1 part of 1000 rows, 3 parts of 900 and 901 rows); 2048 parts.
  const std::vector<std::pair<Geometry, double>> cases = {
      {{1, 5000, 96}, 1.0},    {{4, 49, 64}, 1.0 / 49}, {{3, 10, 16}, 1.0},  {{1, 300, 7}, 0.5},
      {{2, 1000, 24, 1}, 1.0}, {{1, 2702, 16, 3}, 1.0}, {{1, 40000, 8}, 1.0}};
  std::uint32_t seed = 1;
  for (const auto& [g, scale] : cases) {
    if (g.cols % kVector == 0) expect_column_sums<T, kVector>(dtype, g, scale, seed);
    if (::testing::Test::HasFatalFailure()) return;
    expect_column_sums<T, 1>(dtype, g, scale, seed++);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaColumnSumsEmulationTest, Float32MatchesTheSums) { expect_all<float>(DType::float32); }
TEST(CudaColumnSumsEmulationTest, Float16MatchesTheSums) { expect_all<float16>(DType::float16); }
TEST(CudaColumnSumsEmulationTest, Bfloat16MatchesTheSums) { expect_all<bfloat16>(DType::bfloat16); }
TEST(CudaColumnSumsEmulationTest, Float64MatchesTheSums) { expect_all<double>(DType::float64); }

TEST(CudaColumnSumsEmulationTest, WorkSplit) {
  // EfficientNet-B0's widest bias gradient at batch 64: 802816 rows of 96 float16 channels (12
  // vectors): 2048 parts (the cap) of 392 rows.
  EXPECT_EQ(column_sum_parts(DType::float16, 1, 802816, 96), 2048);
  // Global average pooling of (64, 7, 7, 1280) float32: 20480 vectors want 6 parts, but 49 rows
  // give at most 3 parts of 16 rows.
  EXPECT_EQ(column_sum_parts(DType::float32, 64, 49, 1280), 3);
  EXPECT_EQ(column_sum_parts(DType::float32, 1, 10, 7), 1);
  // Many outputs: one part each.
  EXPECT_EQ(column_sum_parts(DType::bfloat16, 512, 4096, 2048), 1);
  EXPECT_EQ(column_sum_partials(DType::float32, 4, 49, 64), 4 * 64 * 3);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
