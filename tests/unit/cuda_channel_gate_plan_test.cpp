// Host-side parts of the CUDA squeeze-and-excitation gate gradient (backend/cuda/channel_gate.h),
// testable without a GPU: the work split of the two passes and the operand checks of the entry
// (the kernels themselves: cuda_channel_gate_emulation_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/channel_gate.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec::cuda {
namespace {

using kernels::channel_gate_plan;
using kernels::GatePlan;

TEST(CudaChannelGatePlanTest, SixteenBitPairsNeedAnEvenChannelCountAndAlignment) {
  const ChannelGeometry g{2, 49, 32};
  EXPECT_EQ(channel_gate_plan(DType::float16, g, true).vector, 2);
  EXPECT_EQ(channel_gate_plan(DType::bfloat16, g, true).vector, 2);
  EXPECT_EQ(channel_gate_plan(DType::float16, g, false).vector, 1);
  EXPECT_EQ(channel_gate_plan(DType::float16, ChannelGeometry{2, 49, 33}, true).vector, 1);
  EXPECT_EQ(channel_gate_plan(DType::float32, g, true).vector, 1);
  EXPECT_EQ(channel_gate_plan(DType::float64, g, true).vector, 1);
}

// Every plan: at least one part, at least 8 pixels per part where there are 8, about 2^17 threads
// at most (one more part would pass it), and scratch exactly for the parts when there are several.
void expect_sound(DType dtype, const ChannelGeometry& g) {
  SCOPED_TRACE(std::to_string(g.groups) + " x " + std::to_string(g.rows) + " x " +
               std::to_string(g.channels));
  const GatePlan plan = channel_gate_plan(dtype, g, true);
  const std::int64_t lanes = g.groups * (g.channels / plan.vector);
  EXPECT_GE(plan.parts, 1);
  if (g.rows >= 8) EXPECT_LE(plan.parts * 8, g.rows);
  if (plan.parts > 1) EXPECT_LT((plan.parts - 1) * lanes, std::int64_t{1} << 17);
  EXPECT_EQ(plan.partials, plan.parts > 1 ? g.groups * plan.parts * g.channels : 0);
  EXPECT_EQ(plan.warp_finish, plan.parts >= 32);
}

TEST(CudaChannelGatePlanTest, PartsFillTheGpuWithEightPixelsOrMoreEach) {
  for (DType dtype : {DType::float32, DType::float16, DType::float64}) {
    for (const ChannelGeometry& g :
         {ChannelGeometry{2, 112 * 112, 32}, ChannelGeometry{64, 112 * 112, 32},
          ChannelGeometry{64, 49, 1152}, ChannelGeometry{16, 49, 512}, ChannelGeometry{4, 25, 1},
          ChannelGeometry{8, 1, 40}, ChannelGeometry{2, 0, 3}, ChannelGeometry{3, 7, 33}}) {
      expect_sound(dtype, g);
    }
  }
  // EfficientNet-B0's first gate at batch 2 in float32: 64 lanes, 2048 parts wanted, 1568 allowed
  // (8 pixels each): the warp finish.
  const GatePlan early = channel_gate_plan(DType::float32, ChannelGeometry{2, 112 * 112, 32}, true);
  EXPECT_EQ(early.parts, 112 * 112 / 8);
  EXPECT_TRUE(early.warp_finish);
  // The last stage at batch 64 in float16 (pairs): 36864 lanes, 4 parts of 12 or 13 pixels.
  const GatePlan late = channel_gate_plan(DType::float16, ChannelGeometry{64, 49, 1152}, true);
  EXPECT_EQ(late.parts, 4);
  EXPECT_FALSE(late.warp_finish);
  // Fewer than 8 pixels, or pixels 1: one part, and pass 1 writes the result (no scratch).
  EXPECT_EQ(channel_gate_plan(DType::float32, ChannelGeometry{8, 7, 4}, true).parts, 1);
  EXPECT_EQ(channel_gate_plan(DType::float32, ChannelGeometry{8, 1, 40}, true).partials, 0);
}

TEST(CudaChannelGatePlanTest, EntryNamesWhatIsWrongWithItsOperands) {
  const Tensor g = zeros({2, 3, 3, 4});
  // CPU tensors (checked before any CUDA call, so this runs without a GPU).
  testing::expect_error<Error>(
      [&] {
        cuda::channel_gate_backward(g, g, Shape{2, 1, 1, 4});
      },
      {"cuda::channel_gate_backward", "CUDA device", "cpu"});
  testing::expect_error<Error>(
      [&] {
        cuda::channel_gate_backward(g, zeros({2, 3, 3, 5}), Shape{2, 1, 1, 4});
      },
      {"one shape", "(2, 3, 3, 5)"});
  testing::expect_error<Error>([&] { cuda::channel_gate_backward(Tensor(), g, Shape{4}); },
                               {"defined"});
}

}  // namespace
}  // namespace mixprec::cuda
