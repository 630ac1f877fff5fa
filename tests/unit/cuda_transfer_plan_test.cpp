// The host-to-device staging ring (backend/cuda/transfer.h), without a GPU: a chunk whose DMA has
// not finished (it is ordered after the compute stream's queued work) is never waited for while
// the ring may grow; new chunks go before the oldest, so chunks are reused oldest first; only a
// ring at its limit waits.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "backend/cuda/transfer.h"

namespace mixprec::cuda::detail {
namespace {

TEST(CudaTransferPlanTest, AnEmptyRingGrows) {
  const StagingStep s = next_staging_chunk(0, 0, false, 4);
  EXPECT_EQ(s.action, StagingAction::grow);
  EXPECT_EQ(s.slot, 0u);
  EXPECT_EQ(s.size, 1u);
  EXPECT_EQ(s.next, 0u);
}

TEST(CudaTransferPlanTest, AFinishedOldestChunkIsReused) {
  const StagingStep s = next_staging_chunk(3, 1, true, 4);
  EXPECT_EQ(s.action, StagingAction::reuse);
  EXPECT_EQ(s.slot, 1u);
  EXPECT_EQ(s.next, 2u);
  EXPECT_EQ(s.size, 3u);
  EXPECT_EQ(next_staging_chunk(3, 2, true, 4).next, 0u);  // wraps
}

TEST(CudaTransferPlanTest, ABusyOldestChunkMakesTheRingGrowNotWait) {
  const StagingStep s = next_staging_chunk(2, 1, false, 4);
  EXPECT_EQ(s.action, StagingAction::grow);
  EXPECT_EQ(s.slot, 1u);  // inserted before the oldest
  EXPECT_EQ(s.size, 3u);
  EXPECT_EQ(s.next, 2u);  // the oldest, moved one place on
}

TEST(CudaTransferPlanTest, OnlyAFullRingWaits) {
  const StagingStep s = next_staging_chunk(4, 3, false, 4);
  EXPECT_EQ(s.action, StagingAction::wait);
  EXPECT_EQ(s.slot, 3u);
  EXPECT_EQ(s.next, 0u);
  EXPECT_EQ(s.size, 4u);
}

// A simulated ring: chunk ids in ring order, each "busy" until the GPU catches up. Transfers of
// 3 chunks per step while the GPU is behind: no wait until the ring reaches its limit, chunks are
// always reused oldest first, and every chunk in use is distinct.
TEST(CudaTransferPlanTest, ASimulatedTrainingLoopNeverWaitsWhileTheRingCanGrow) {
  const std::size_t max_chunks = 8;
  std::vector<int> ring;       // chunk ids in ring order
  std::vector<int> filled_at;  // per chunk id: the step it was last filled in
  std::size_t next = 0;
  int waits = 0, ids = 0;
  std::deque<int> use_order;  // ids in the order they were filled
  const int gpu_lag = 3;      // the GPU finishes step t's copies during step t + 3
  for (int step = 0; step < 10; ++step) {
    for (int piece = 0; piece < 3; ++piece) {
      const bool oldest_done =
          !ring.empty() && filled_at[static_cast<std::size_t>(ring[next])] + gpu_lag <= step;
      const StagingStep s = next_staging_chunk(ring.size(), next, oldest_done, max_chunks);
      if (s.action == StagingAction::grow) {
        ring.insert(ring.begin() + static_cast<std::ptrdiff_t>(s.slot), ids++);
        filled_at.push_back(-1);
      }
      if (s.action == StagingAction::wait) ++waits;
      ASSERT_EQ(s.size, ring.size());
      const int id = ring[s.slot];
      filled_at[static_cast<std::size_t>(id)] = step;
      use_order.push_back(id);
      next = s.next;
    }
  }
  // Three steps of three chunks are in flight (lag 3): nine > eight chunks, so the full ring
  // waits sometimes, but never before it has grown to its limit (next test: with less in flight
  // it never waits at all).
  EXPECT_EQ(ring.size(), max_chunks);
  EXPECT_GT(waits, 0);
  // Oldest first: once the ring stopped growing, chunks are reused in ring order.
  const std::size_t n = use_order.size();
  for (std::size_t i = n - 8; i < n; ++i) {
    EXPECT_EQ(use_order[i], use_order[i - 8]);
  }
}

TEST(CudaTransferPlanTest, AGpuTwoStepsBehindCostsNoWait) {
  // Lag 2: chunks of the previous and the current step are busy, six at most: the ring grows to
  // six and the host never waits.
  std::vector<int> ring, filled_at;
  std::size_t next = 0;
  int ids = 0;
  for (int step = 0; step < 20; ++step) {
    for (int piece = 0; piece < 3; ++piece) {
      const bool oldest_done =
          !ring.empty() && filled_at[static_cast<std::size_t>(ring[next])] + 2 <= step;
      const StagingStep s = next_staging_chunk(ring.size(), next, oldest_done, 8);
      ASSERT_NE(s.action, StagingAction::wait) << "step " << step;
      if (s.action == StagingAction::grow) {
        ring.insert(ring.begin() + static_cast<std::ptrdiff_t>(s.slot), ids++);
        filled_at.push_back(-1);
      }
      filled_at[static_cast<std::size_t>(ring[s.slot])] = step;
      next = s.next;
    }
  }
  EXPECT_EQ(ring.size(), 6u);
}

TEST(CudaTransferPlanTest, ARingThatKeepsUpStaysSmall) {
  // The GPU is never behind: every oldest chunk is done, the ring stays at one chunk.
  std::size_t size = 0, next = 0;
  for (int i = 0; i < 100; ++i) {
    const StagingStep s = next_staging_chunk(size, next, size > 0, kMaxStagingChunks);
    EXPECT_NE(s.action, StagingAction::wait);
    size = s.size;
    next = s.next;
  }
  EXPECT_EQ(size, 1u);
}

}  // namespace
}  // namespace mixprec::cuda::detail
