// Host-side parts of the device optimizers and loss scaling (backend/cuda/optimizers.h), testable
// without a GPU: the multi-tensor launch planner and tables. The per-element bodies the kernels run
// (updates, unscale-and-check, the loss-scale rule) are tested in training_math_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/optimizers.h"
#include "mixprec/error.h"

namespace mixprec {
namespace {

using cuda::MultiTensorLaunch;

// Every (tensor, chunk) of non-empty tensors exactly once, limits respected, order preserved.
void expect_valid_plan(const std::vector<std::int64_t>& numels, int max_tensors, int max_blocks,
                       std::int64_t chunk) {
  const std::vector<MultiTensorLaunch> plan =
      cuda::plan_multi_tensor(numels, max_tensors, max_blocks, chunk);
  std::map<std::pair<int, std::int64_t>, int> seen;
  std::pair<int, std::int64_t> previous{-1, -1};
  for (const MultiTensorLaunch& launch : plan) {
    ASSERT_FALSE(launch.blocks.empty());
    ASSERT_LE(static_cast<int>(launch.tensors.size()), max_tensors);
    ASSERT_LE(static_cast<int>(launch.blocks.size()), max_blocks);
    for (const MultiTensorLaunch::Block& b : launch.blocks) {
      ASSERT_GE(b.slot, 0);
      ASSERT_LT(b.slot, static_cast<int>(launch.tensors.size()));
      const std::pair<int, std::int64_t> key{launch.tensors[static_cast<std::size_t>(b.slot)],
                                             b.chunk};
      EXPECT_LT(previous, key) << "blocks must follow tensor and chunk order";
      previous = key;
      ++seen[key];
    }
  }
  std::size_t expected = 0;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const std::int64_t chunks = (numels[i] + chunk - 1) / chunk;
    for (std::int64_t c = 0; c < chunks; ++c) {
      EXPECT_EQ((seen[{static_cast<int>(i), c}]), 1) << "tensor " << i << " chunk " << c;
    }
    expected += static_cast<std::size_t>(chunks);
  }
  EXPECT_EQ(seen.size(), expected);
}

TEST(CudaOptimizerPlanTest, SmallListIsOneLaunch) {
  const auto plan = cuda::plan_multi_tensor({10, 1, 16384, 16385});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{0, 1, 2, 3}));
  // 1 + 1 + 1 + 2 chunks of 16384 elements.
  ASSERT_EQ(plan[0].blocks.size(), 5u);
  EXPECT_EQ(plan[0].blocks[3].slot, 3);
  EXPECT_EQ(plan[0].blocks[3].chunk, 0);
  EXPECT_EQ(plan[0].blocks[4].slot, 3);
  EXPECT_EQ(plan[0].blocks[4].chunk, 1);
}

TEST(CudaOptimizerPlanTest, EmptyTensorsGetNoBlockAndNoSlot) {
  const auto plan = cuda::plan_multi_tensor({0, 5, 0, 0, 7});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{1, 4}));
  EXPECT_TRUE(cuda::plan_multi_tensor({0, 0}).empty());
  EXPECT_TRUE(cuda::plan_multi_tensor({}).empty());
}

TEST(CudaOptimizerPlanTest, TooManyTensorsSplitIntoLaunches) {
  const std::vector<std::int64_t> numels(70, 3);
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 3u);  // 32 + 32 + 6 tensors
  EXPECT_EQ(plan[0].tensors.size(), 32u);
  EXPECT_EQ(plan[2].tensors.size(), 6u);
  EXPECT_EQ(plan[1].tensors.front(), 32);
  expect_valid_plan(numels, cuda::kMultiTensorMaxTensors, cuda::kMultiTensorMaxBlocks,
                    cuda::kMultiTensorChunk);
}

TEST(CudaOptimizerPlanTest, ALargeTensorContinuesInTheNextLaunch) {
  // 1000 chunks: 383 after the first small tensor, then 384, then 233.
  const std::vector<std::int64_t> numels = {5, 1000 * cuda::kMultiTensorChunk, 9};
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan[1].tensors, (std::vector<int>{1}));
  EXPECT_EQ(plan[1].blocks.front().chunk, 383);
  EXPECT_EQ(plan[2].tensors, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan[2].blocks.size(), 1000u - 383 - 384 + 1);
  expect_valid_plan(numels, cuda::kMultiTensorMaxTensors, cuda::kMultiTensorMaxBlocks,
                    cuda::kMultiTensorChunk);
}

TEST(CudaOptimizerPlanTest, RandomListsWithSmallLimitsAreCoveredExactlyOnce) {
  std::uint64_t x = 12345;
  for (int round = 0; round < 50; ++round) {
    std::vector<std::int64_t> numels;
    const int count = 1 + static_cast<int>((x >> 7) % 40);
    for (int i = 0; i < count; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      numels.push_back(static_cast<std::int64_t>((x >> 33) % 200));
    }
    const int max_tensors = 1 + round % 5, max_blocks = 1 + round % 7;
    const std::int64_t chunk = 1 + round % 13;
    SCOPED_TRACE("round " + std::to_string(round));
    expect_valid_plan(numels, max_tensors, max_blocks, chunk);
  }
}

TEST(CudaOptimizerPlanTest, BadLimitsThrow) {
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 0, 8, 16), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 8, cuda::kMultiTensorMaxBlocks + 1, 16), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 8, 8, 0), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({-1}), ValueError);
}

TEST(CudaOptimizerPlanTest, TableCarriesPointersCountsAndBlocks) {
  const std::vector<std::int64_t> numels = {3, 0, 40000};
  std::vector<float> a(3), b(40000);
  std::vector<float> out_a(3), out_b(40000);
  const std::vector<void*> operands[2] = {{a.data(), nullptr, b.data()},
                                          {out_a.data(), nullptr, out_b.data()}};
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 1u);
  const auto table = cuda::make_multi_tensor_table(plan[0], operands, numels, {0.5f, 1.0f, 0.25f});
  EXPECT_EQ(table.tensors, 2);
  EXPECT_EQ(table.blocks, 4);  // 1 + ceil(40000 / 16384) = 1 + 3
  EXPECT_EQ(table.ptr[0][0], a.data());
  EXPECT_EQ(table.ptr[1][1], out_b.data());
  EXPECT_EQ(table.numel[1], 40000);
  EXPECT_EQ(table.clip_scale[0], 0.5f);
  EXPECT_EQ(table.clip_scale[1], 0.25f);
  EXPECT_EQ(table.block_tensor[3], 1);
  EXPECT_EQ(table.block_chunk[3], 2);
  const auto no_clip = cuda::make_multi_tensor_table(plan[0], operands, numels);
  EXPECT_EQ(no_clip.clip_scale[1], 1.0f);
}

}  // namespace
}  // namespace mixprec
