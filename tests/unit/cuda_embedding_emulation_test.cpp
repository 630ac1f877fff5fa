// The CUDA embedding kernels (kernels/embedding_kernels.cuh) run on the CPU by the host emulation
// (support/cuda_host_emulation.h) in embedding.cu's order (keys, the bitonic steps, the
// accumulation), against the CPU backend (cpu/embedding.h): the gather bit for bit (a NaN row for
// an out-of-range id, which the kernel never reads), the sorted keys strictly increasing, and the
// scatter-add bit for bit the CPU's (the same float sums in position order), with repeated ids,
// out-of-range ids skipped, position counts that are not powers of two, int32 and int64 ids and
// 16-bit and float64 gradients. No GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/embedding.h"
#include "backend/cuda/embedding.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/embedding_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using namespace embedding_kernels;

template <typename T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float16>) return DType::float16;
  if constexpr (std::is_same_v<T, bfloat16>) return DType::bfloat16;
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  return DType::float32;
}

template <typename I>
DType id_dtype() {
  return std::is_same_v<I, std::int32_t> ? DType::int32 : DType::int64;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> out(static_cast<std::size_t>(t.numel()));
  const Tensor c = t.contiguous();
  std::memcpy(out.data(), c.data_ptr(), c.nbytes());
  return out;
}

// Sorts keys as embedding.cu does: the keys kernel, then every bitonic step.
template <typename I>
std::vector<std::uint64_t> sorted_keys(const std::vector<I>& ids, std::int64_t vocab) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t padded = embedding_padded(n);
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(padded), 0);
  run_grid(block_grid(padded), [&] { keys_kernel<I>(ids.data(), n, vocab, padded, keys.data()); });
  for (std::int64_t size = 2; size <= padded; size *= 2) {
    for (std::int64_t j = size / 2; j > 0; j /= 2) {
      run_grid(block_grid(padded),
               [&] { bitonic_step_kernel<std::uint64_t>(keys.data(), padded, j, size); });
    }
  }
  return keys;
}

Tensor testing_table(std::int64_t vocab, std::int64_t c, std::uint32_t seed) {
  Generator gen(seed);
  return random_normal(Shape{vocab, c}, 0.0, 1.0, {.dtype = DType::float32}, gen);
}

// G: the output gradient's storage type; T: the table's.
template <typename I, typename G, typename T>
void check_case(std::int64_t n, std::int64_t vocab, std::int64_t c, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::vector<I> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    // Every fifth position holds id 1: long runs of one id (the scatter-add adds them in order).
    ids[i] = static_cast<I>(i % 5 == 0 ? 1 : pick(gen));
  }
  const std::string what = std::string(dtype_name(dtype_of<G>())) + "/" +
                           std::string(dtype_name(dtype_of<T>())) + " n " + std::to_string(n);
  // ---- gather: table float32 (any output) against the CPU's ----
  const Tensor table = testing_table(vocab, c, seed);
  const std::vector<float> tv = table.to_vector<float>();
  std::vector<G> out(static_cast<std::size_t>(n * c));
  using PG = compute_t<G>;
  run_grid(block_grid(n * c), [&] {
    gather_kernel<I, float, G>(ids.data(), n, tv.data(), vocab, c,
                               std::numeric_limits<PG>::quiet_NaN(), out.data());
  });
  const Tensor ids_t = from_vector(std::vector<std::int64_t>(ids.begin(), ids.end()), Shape{n},
                                   {.dtype = DType::int64})
                           .to(id_dtype<I>());
  const Tensor cpu_out = cpu::embedding_gather(table, ids_t, dtype_of<G>());
  ASSERT_EQ(std::memcmp(out.data(), cpu_out.data_ptr(), cpu_out.nbytes()), 0) << what;

  // ---- scatter-add: the sorted keys, then the sums, against the CPU's ----
  std::vector<I> bad_ids = ids;
  bad_ids[static_cast<std::size_t>(n / 2)] = static_cast<I>(vocab);  // skipped
  if (n > 3) bad_ids[3] = static_cast<I>(-2);                        // skipped
  const std::vector<std::uint64_t> keys = sorted_keys(bad_ids, vocab);
  // The n keys strictly increasing (ids, then positions), the padding (~0) after them.
  for (std::int64_t i = 1; i < n; ++i) ASSERT_LT(keys[i - 1], keys[i]) << what << i;
  for (std::size_t i = static_cast<std::size_t>(n); i < keys.size(); ++i) {
    ASSERT_EQ(keys[i], ~std::uint64_t{0}) << what << i;
  }
  std::uniform_real_distribution<double> dist(-50.0, 50.0);
  std::vector<double> gd(static_cast<std::size_t>(n * c));
  for (double& v : gd) v = dist(gen);
  const Tensor g_t = from_vector(gd, Shape{n, c}, {.dtype = DType::float64}).to(dtype_of<G>());
  const std::vector<G> g = values_of<G>(g_t);
  std::vector<T> grad(static_cast<std::size_t>(vocab * c), T(0));  // the launcher zero-fills
  run_grid(block_grid(n * c),
           [&] { accumulate_kernel<G, T>(keys.data(), n, g.data(), c, vocab, grad.data()); });
  const Tensor bad_t = from_vector(std::vector<std::int64_t>(bad_ids.begin(), bad_ids.end()),
                                   Shape{n}, {.dtype = DType::int64})
                           .to(id_dtype<I>());
  const Tensor cpu_grad = cpu::embedding_scatter_add(g_t, bad_t, vocab, dtype_of<T>());
  ASSERT_EQ(std::memcmp(grad.data(), cpu_grad.data_ptr(), cpu_grad.nbytes()), 0) << what;
}

TEST(CudaEmbeddingEmulation, GatherAndScatterAddMatchTheCpuBitForBit) {
  check_case<std::int32_t, float, float>(37, 11, 6, 1);
  check_case<std::int64_t, float, float>(64, 5, 3, 2);
  check_case<std::int32_t, float16, float>(100, 23, 8, 3);
  check_case<std::int64_t, bfloat16, float>(29, 7, 5, 4);
  check_case<std::int32_t, double, double>(50, 9, 4, 5);
  check_case<std::int32_t, float, float>(1, 3, 2, 6);
}

TEST(CudaEmbeddingEmulation, OutOfRangeIdsGiveNanRowsWithoutReadingTheTable) {
  // A one-row table and ids far outside it: a read would go out of bounds (ASan catches it).
  const std::vector<float> table = {1.5f, -2.0f};
  const std::vector<std::int64_t> ids = {0, 1, -1, 1000000};
  std::vector<float> out(8, 0.0f);
  run_grid(block_grid(8), [&] {
    gather_kernel<std::int64_t, float, float>(ids.data(), 4, table.data(), 1, 2,
                                              std::numeric_limits<float>::quiet_NaN(), out.data());
  });
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  for (int i = 2; i < 8; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
}

TEST(CudaEmbeddingEmulation, PaddedLength) {
  EXPECT_EQ(embedding_padded(1), 1);
  EXPECT_EQ(embedding_padded(5), 8);
  EXPECT_EQ(embedding_padded(8192), 8192);
  EXPECT_EQ(embedding_padded(8193), 16384);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
