// The per-channel broadcast of a CUDA binary op without a GPU: which plans take the vectorised
// kernel (kernels::channel_plan over cuda::make_plan of CPU tensors of the shapes), and the kernel
// itself (kernels/binary_channel_kernels.cuh) run by the host emulation
// (support/cuda_host_emulation.h) against the same per-element function applied one element at a
// time, bit for bit, for both operand orders, a single group, and every storage type.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/launch.h"
#include "backend/cuda/plan.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernel, compiled for the host.
#include "backend/cuda/kernels/binary_channel_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using binary_channel_kernels::binary_channel_kernel;

std::optional<ChannelPlan> plan_of(const Shape& a, const Shape& b) {
  const Tensor ta = zeros(a), tb = zeros(b);
  return channel_plan(make_plan<2>(broadcast_shapes(a, b, "test"), {&ta, &tb}));
}

TEST(CudaBinaryChannelTest, PerChannelBroadcastPlansAreRecognised) {
  const auto gate = plan_of({4, 7, 7, 32}, {4, 1, 1, 32});  // the squeeze-and-excitation gate
  ASSERT_TRUE(gate.has_value());
  EXPECT_EQ(gate->full, 0);
  EXPECT_EQ(gate->group_size, 7 * 7 * 32);
  EXPECT_EQ(gate->channels, 32);
  const auto reversed = plan_of({4, 1, 1, 32}, {4, 7, 7, 32});
  ASSERT_TRUE(reversed.has_value());
  EXPECT_EQ(reversed->full, 1);
  const auto bias = plan_of({4, 7, 7, 32}, {32});  // one group: every pixel row
  ASSERT_TRUE(bias.has_value());
  EXPECT_EQ(bias->group_size, 4 * 7 * 7 * 32);
  EXPECT_EQ(bias->channels, 32);
  // Broadcast over W only: the plan merges N and H, so each (n, h) is a group of W rows.
  const auto rows = plan_of({4, 7, 5, 32}, {4, 7, 1, 32});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->group_size, 5 * 32);
  // Not a per-channel broadcast: same shapes (dense), a spatial map, a column vector.
  EXPECT_FALSE(plan_of({4, 7, 7, 32}, {4, 7, 7, 32}).has_value());
  EXPECT_FALSE(plan_of({4, 7, 7, 32}, {1, 7, 7, 1}).has_value());
  EXPECT_FALSE(plan_of({4, 7, 32}, {4, 7, 1}).has_value());
}

// Runs the kernel over (groups, rows, channels) and checks every element against binary_value.
template <typename T>
void expect_kernel(BinaryOp op, std::int64_t groups, std::int64_t rows, std::int64_t channels,
                   bool small_first) {
  SCOPED_TRACE(std::string(op_name(op)) + " groups " + std::to_string(groups) + " rows " +
               std::to_string(rows) + " channels " + std::to_string(channels) +
               (small_first ? ", small first" : ""));
  constexpr int V = 16 / sizeof(T);
  ASSERT_EQ(channels % V, 0);
  const std::int64_t total = groups * rows * channels;
  std::mt19937 gen(static_cast<std::uint32_t>(total + channels));
  std::uniform_real_distribution<float> dist(0.25f, 2.0f);
  std::vector<T> full(total), small(groups * channels), out(total);
  for (T& v : full) v = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
  for (T& v : small) v = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
  run_grid(7 * kWarp, [&] {
    binary_channel_kernel<T, V>(
        op, static_cast<std::uint32_t>(total), static_cast<std::uint32_t>(rows * channels),
        static_cast<std::uint32_t>(channels), full.data(), small.data(), small_first, out.data());
  });
  for (std::int64_t i = 0; i < total; ++i) {
    const auto f = to_compute(full[i]);
    const auto s = to_compute(small[(i / (rows * channels)) * channels + i % channels]);
    const T want = from_compute<T>(small_first ? kernel_math::binary_value(op, s, f)
                                               : kernel_math::binary_value(op, f, s));
    ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(T)), 0) << "element " << i;
  }
}

template <typename T>
void expect_all() {
  for (BinaryOp op : {BinaryOp::mul, BinaryOp::add, BinaryOp::sub, BinaryOp::div}) {
    for (bool small_first : {false, true}) {
      expect_kernel<T>(op, 3, 49, 32, small_first);  // several groups
      expect_kernel<T>(op, 1, 37, 16, small_first);  // one group
    }
  }
}

TEST(CudaBinaryChannelEmulationTest, Float32) { expect_all<float>(); }
TEST(CudaBinaryChannelEmulationTest, Float16) { expect_all<float16>(); }
TEST(CudaBinaryChannelEmulationTest, Bfloat16) { expect_all<bfloat16>(); }
TEST(CudaBinaryChannelEmulationTest, Float64) { expect_all<double>(); }

}  // namespace
}  // namespace mixprec::cuda::kernels
