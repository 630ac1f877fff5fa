// The CUDA caching allocator's bookkeeping (cuda/caching_allocator.h) driven by aligned host
// malloc/free, so that it runs on machines without a GPU: size rounding, reuse without a new raw
// allocation, small blocks sharing 2 MiB segments, best fit, splitting and merging, per-stream free
// lists, releasing the cache, and the release-and-retry path when the raw allocator runs out.
// Expected addresses and sizes are worked out by hand from the documented rules.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "backend/cuda/caching_allocator.h"

namespace mixprec::cuda {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

// A raw allocator over aligned_alloc with counters and an optional budget (bytes it may hold).
struct FakeRaw {
  std::int64_t allocations = 0, releases = 0, failures = 0;
  std::size_t held = 0, budget = SIZE_MAX;
  std::set<void*> live;

  RawMemory raw() {
    RawMemory r;
    r.allocate = [this](std::size_t bytes) -> void* {
      if (held + bytes > budget) {
        ++failures;
        return nullptr;
      }
      void* p = std::aligned_alloc(512, bytes);
      if (p == nullptr) return nullptr;
      ++allocations;
      held += bytes;
      live.insert(p);
      sizes[p] = bytes;
      return p;
    };
    r.release = [this](void* p) {
      EXPECT_EQ(live.count(p), 1u) << "released a pointer that was not allocated";
      live.erase(p);
      held -= sizes[p];
      ++releases;
      std::free(p);
    };
    return r;
  }
  std::map<void*, std::size_t> sizes;
};

constexpr StreamId kStream = 1, kOtherStream = 2;

std::uintptr_t addr(void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(CudaAllocatorTest, RoundsRequestsUpTo512Bytes) {
  EXPECT_EQ(BlockPool::round_size(0), 512u);
  EXPECT_EQ(BlockPool::round_size(1), 512u);
  EXPECT_EQ(BlockPool::round_size(512), 512u);
  EXPECT_EQ(BlockPool::round_size(513), 1024u);
  EXPECT_EQ(BlockPool::round_size(3 * MiB + 1), 3 * MiB + 512);
}

TEST(CudaAllocatorTest, ASecondAllocationOfTheSameSizeReusesTheBlock) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(1000, kStream);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool.block_size(a), 1024u);
  EXPECT_TRUE(pool.deallocate(a));
  void* b = pool.allocate(1000, kStream);
  EXPECT_EQ(b, a);
  EXPECT_EQ(fake.allocations, 1);  // one raw allocation (one 2 MiB segment) in all
  EXPECT_EQ(fake.held, 2 * MiB);
  // A steady loop of the same sizes draws nothing new.
  for (int step = 0; step < 100; ++step) {
    void* x = pool.allocate(300 * KiB, kStream);
    void* y = pool.allocate(5 * MiB, kStream);
    pool.deallocate(x);
    pool.deallocate(y);
  }
  EXPECT_EQ(fake.allocations, 2);  // + one 6 MiB segment for the large block
  pool.deallocate(b);
}

TEST(CudaAllocatorTest, SmallBlocksShareA2MiBSegment) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(100, kStream);
  void* b = pool.allocate(700, kStream);
  void* c = pool.allocate(512 * KiB, kStream);
  EXPECT_EQ(fake.allocations, 1);
  // Carved in order from the start of the segment: 512 B, then 1 KiB, then 512 KiB.
  EXPECT_EQ(addr(b), addr(a) + 512);
  EXPECT_EQ(addr(c), addr(a) + 512 + 1024);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(s.allocated_bytes, static_cast<std::int64_t>(512 + 1024 + 512 * KiB));
  EXPECT_EQ(s.cached_bytes(), static_cast<std::int64_t>(2 * MiB - 512 - 1024 - 512 * KiB));
  EXPECT_EQ(s.allocated_blocks, 3);
  // 1534.5 KiB are left in the segment: the first 1 MiB fits there, the second opens another.
  void* d = pool.allocate(1 * MiB, kStream);
  EXPECT_EQ(fake.allocations, 1);
  EXPECT_EQ(addr(d), addr(c) + 512 * KiB);
  void* e = pool.allocate(1 * MiB, kStream);
  EXPECT_EQ(fake.allocations, 2);
  EXPECT_NE(e, nullptr);
  for (void* p : {a, b, c, d, e}) EXPECT_TRUE(pool.deallocate(p));
  EXPECT_EQ(pool.stats().allocated_bytes, 0);
}

TEST(CudaAllocatorTest, FreedNeighboursMergeAndServeALargerRequest) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(256 * KiB, kStream);
  void* b = pool.allocate(256 * KiB, kStream);
  void* c = pool.allocate(256 * KiB, kStream);
  pool.deallocate(a);
  pool.deallocate(b);  // merges with a: one free 512 KiB block at a; the 1.25 MiB tail is free too
  void* d = pool.allocate(512 * KiB, kStream);
  EXPECT_EQ(d, a);  // best fit: the merged 512 KiB block, not the larger tail
  EXPECT_EQ(fake.allocations, 1);
  pool.deallocate(c);
  pool.deallocate(d);
  // Everything merged back into the whole segment, which release_cached returns.
  EXPECT_EQ(pool.release_cached(), 2 * MiB);
  EXPECT_EQ(fake.releases, 1);
  EXPECT_EQ(fake.held, 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0);
}

TEST(CudaAllocatorTest, LargeRequestsTakeTheBestFitAndSplitOnlyBigRemainders) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* four = pool.allocate(4 * MiB, kStream);   // a 4 MiB segment
  void* eight = pool.allocate(8 * MiB, kStream);  // an 8 MiB segment
  EXPECT_EQ(fake.allocations, 2);
  pool.deallocate(four);
  pool.deallocate(eight);
  // 3 MiB: the 4 MiB block fits best; its 1 MiB remainder is too small to split off (a large
  // block never serves small requests), so the whole 4 MiB is handed out.
  void* p = pool.allocate(3 * MiB, kStream);
  EXPECT_EQ(p, four);
  EXPECT_EQ(pool.block_size(p), 4 * MiB);
  // 5 MiB: the 8 MiB block, split; the 3 MiB remainder then serves a 2 MiB request.
  void* q = pool.allocate(5 * MiB, kStream);
  EXPECT_EQ(q, eight);
  EXPECT_EQ(pool.block_size(q), 5 * MiB);
  void* r = pool.allocate(2 * MiB, kStream);
  EXPECT_EQ(addr(r), addr(eight) + 5 * MiB);
  EXPECT_EQ(pool.block_size(r), 3 * MiB);  // 1 MiB remainder not split
  EXPECT_EQ(fake.allocations, 2);
  // A fresh large segment is the request rounded up to 2 MiB.
  void* s = pool.allocate(5 * MiB + 1, kStream);
  EXPECT_EQ(fake.allocations, 3);
  EXPECT_EQ(fake.sizes[s], 6 * MiB);
  for (void* x : {p, q, r, s}) pool.deallocate(x);
}

TEST(CudaAllocatorTest, FreeListsArePerStream) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(64 * KiB, kStream);
  pool.deallocate(a);
  // Work queued on kStream may still use a; another stream gets a segment of its own.
  void* b = pool.allocate(64 * KiB, kOtherStream);
  EXPECT_EQ(fake.allocations, 2);
  EXPECT_NE(b, a);
  void* c = pool.allocate(64 * KiB, kStream);
  EXPECT_EQ(c, a);
  pool.deallocate(b);
  pool.deallocate(c);
}

TEST(CudaAllocatorTest, ReleaseCachedKeepsSegmentsInUse) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(1000, kStream);      // segment 1 (small), stays in use
  void* b = pool.allocate(10 * MiB, kStream);  // segment 2 (large)
  pool.deallocate(b);
  EXPECT_EQ(pool.stats().cached_bytes(), static_cast<std::int64_t>(2 * MiB - 1024 + 10 * MiB));
  EXPECT_EQ(pool.release_cached(), 10 * MiB);  // only the wholly free segment
  EXPECT_EQ(fake.releases, 1);
  EXPECT_EQ(pool.stats().reserved_bytes, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(pool.stats().segment_releases, 1);
  EXPECT_EQ(pool.stats().segment_allocations, 2);
  pool.deallocate(a);
  EXPECT_EQ(pool.release_cached(), 2 * MiB);
  EXPECT_EQ(fake.held, 0u);
}

TEST(CudaAllocatorTest, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  FakeRaw fake;
  fake.budget = 8 * MiB;
  BlockPool pool(fake.raw());
  void* a = pool.allocate(6 * MiB, kStream);
  pool.deallocate(a);  // 6 MiB cached
  // 4 MiB comes out of the cached 6 MiB block (split; the 2 MiB rest merges back on free).
  void* b = pool.allocate(4 * MiB, kStream);
  EXPECT_EQ(b, a);
  pool.deallocate(b);
  // 7 MiB: no cached block fits; a new 8 MiB segment exceeds the budget while 6 MiB are cached,
  // so the cache is released and the retry succeeds.
  void* c = pool.allocate(7 * MiB, kStream);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fake.failures, 1);
  EXPECT_EQ(fake.releases, 1);
  EXPECT_EQ(fake.held, 8 * MiB);
  // Nothing cached to give back: nullptr (the caller reports out of memory), state unchanged.
  EXPECT_EQ(pool.allocate(2 * MiB, kStream), nullptr);
  EXPECT_EQ(pool.stats().allocated_bytes, static_cast<std::int64_t>(8 * MiB));
  pool.deallocate(c);
}

TEST(CudaAllocatorTest, UnknownPointersAreRefused) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  int local = 0;
  EXPECT_FALSE(pool.deallocate(&local));
  void* a = pool.allocate(1, kStream);
  EXPECT_TRUE(pool.deallocate(a));
  EXPECT_FALSE(pool.deallocate(a));  // a double free is refused, not corrupting
  EXPECT_EQ(pool.stats().allocated_blocks, 0);
}

TEST(CudaAllocatorTest, BlocksKeep512ByteAlignment) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  std::vector<void*> blocks;
  for (std::size_t bytes : {1u, 513u, 4000u, 70000u, 3u * 1024u * 1024u})
    blocks.push_back(pool.allocate(bytes, kStream));
  for (void* p : blocks) {
    EXPECT_EQ(addr(p) % 512, 0u);
    pool.deallocate(p);
  }
}

}  // namespace
}  // namespace mixprec::cuda
