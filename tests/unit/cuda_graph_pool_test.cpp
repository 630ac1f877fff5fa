// The caching allocator's private pools (cuda/caching_allocator.h; the memory of CUDA graphs,
// issue 28) driven by aligned host malloc/free, so that they run without a GPU: allocations inside
// a private window come from the pool's own segments, blocks of the pool are never handed to the
// shared cache while it lives, shared blocks freed during the window are held back until the pool
// is released, live pools survive release_cached() and the out-of-memory retry, and the
// allocation counters that the GPU test uses to show that replays allocate nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "backend/cuda/caching_allocator.h"

namespace mixprec::cuda {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;
constexpr StreamId kStream = 1;

// A raw allocator over aligned_alloc with counters and an optional budget (bytes it may hold).
struct FakeRaw {
  std::int64_t allocations = 0, releases = 0;
  std::size_t held = 0, budget = SIZE_MAX;
  std::map<void*, std::size_t> live;

  RawMemory raw() {
    RawMemory r;
    r.allocate = [this](std::size_t bytes) -> void* {
      if (held + bytes > budget) return nullptr;
      void* p = std::aligned_alloc(512, bytes);
      if (p == nullptr) return nullptr;
      ++allocations;
      held += bytes;
      live[p] = bytes;
      return p;
    };
    r.release = [this](void* p) {
      EXPECT_EQ(live.count(p), 1u) << "released a pointer that was not allocated";
      held -= live[p];
      live.erase(p);
      ++releases;
      std::free(p);
    };
    return r;
  }
};

TEST(CudaGraphPoolTest, AWindowDrawsItsOwnSegmentsEvenWithTheSharedCacheFree) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  // A free 2 MiB small segment in the shared cache.
  pool.deallocate(pool.allocate(4 * KiB, kStream));
  ASSERT_EQ(fake.allocations, 1);
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  EXPECT_EQ(pool.private_window(), graph);
  void* a = pool.allocate(4 * KiB, kStream);
  pool.end_private();
  EXPECT_EQ(pool.private_window(), 0u);
  EXPECT_EQ(fake.allocations, 2) << "the shared cache's free block must not serve the window";
  const PrivatePoolStats s = pool.private_stats(graph);
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.reserved_bytes, static_cast<std::int64_t>(BlockPool::kSmallSegment));
  EXPECT_EQ(s.allocated_bytes, static_cast<std::int64_t>(4 * KiB));
  EXPECT_EQ(s.allocations, 1);
  EXPECT_EQ(pool.stats().private_allocations, 1);
  EXPECT_EQ(pool.stats().private_reserved_bytes,
            static_cast<std::int64_t>(BlockPool::kSmallSegment));
  pool.deallocate(a);
  pool.release_private(graph);
  EXPECT_EQ(pool.stats().private_reserved_bytes, 0);
}

// The property graphs need: a block the captured work used (allocated in the window, freed in it
// or after it) is never handed to an allocation outside the pool while the pool lives. Without
// private pools the shared allocation below takes the freed block's address.
TEST(CudaGraphPoolTest, BlocksOfALivePoolAreNeverReusedOutsideIt) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  void* t1 = pool.allocate(64 * KiB, kStream);
  pool.deallocate(t1);  // a temporary of the captured step
  void* t2 = pool.allocate(64 * KiB, kStream);
  EXPECT_EQ(t2, t1) << "inside the window the pool reuses its own blocks (one captured stream)";
  void* out = pool.allocate(3 * MiB, kStream);  // a large block, kept after the capture
  pool.deallocate(t2);
  pool.end_private();
  pool.deallocate(out);  // freed after the capture: still the pool's

  std::set<void*> shared;
  for (int i = 0; i < 8; ++i) shared.insert(pool.allocate(64 * KiB, kStream));
  void* big = pool.allocate(3 * MiB, kStream);
  EXPECT_EQ(shared.count(t1), 0u) << "a shared allocation took a block of the live graph pool";
  EXPECT_NE(big, out) << "a shared allocation took a block of the live graph pool";
  // The pool's blocks serve its next window (a re-capture into the same pool).
  pool.begin_private(graph);
  EXPECT_EQ(pool.allocate(64 * KiB, kStream), t1);
  pool.end_private();
  for (void* p : shared) pool.deallocate(p);
  pool.deallocate(big);
  pool.deallocate(t1);
  pool.release_private(graph);
}

TEST(CudaGraphPoolTest, SharedBlocksFreedInTheWindowAreHeldUntilThePoolIsReleased) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  void* before = pool.allocate(64 * KiB, kStream);  // e.g. the previous step's gradient
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  EXPECT_TRUE(pool.deallocate(before));
  EXPECT_FALSE(pool.deallocate(before)) << "a held block is not freed twice";
  pool.end_private();
  EXPECT_EQ(pool.stats().held_blocks, 1);
  EXPECT_EQ(pool.private_stats(graph).held_blocks, 1);
  void* other = pool.allocate(64 * KiB, kStream);
  EXPECT_NE(other, before) << "the captured work may still read the held block";
  pool.release_private(graph);
  EXPECT_EQ(pool.stats().held_blocks, 0);
  void* again = pool.allocate(64 * KiB, kStream);
  EXPECT_EQ(again, before) << "released with the pool: back in the shared cache";
  pool.deallocate(other);
  pool.deallocate(again);
}

TEST(CudaGraphPoolTest, ReleaseCachedKeepsLivePoolsAndReleasedPoolsJoinTheSharedCache) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  void* kept = pool.allocate(3 * MiB, kStream);  // outlives the pool (a captured output)
  pool.deallocate(pool.allocate(4 * KiB, kStream));
  pool.end_private();
  EXPECT_EQ(pool.release_cached(), 0u) << "segments of a live graph pool stay";
  EXPECT_EQ(fake.releases, 0);
  pool.release_private(graph);
  EXPECT_EQ(pool.release_cached(), BlockPool::kSmallSegment) << "now shared and wholly free";
  // The block still handed out returns to the shared cache: a shared allocation reuses it.
  pool.deallocate(kept);
  EXPECT_EQ(pool.allocate(3 * MiB, kStream), kept);
  pool.deallocate(kept);
  EXPECT_EQ(pool.private_stats(graph).segments, 0) << "a released pool is unknown";
}

TEST(CudaGraphPoolTest, OutOfMemoryInsideAWindowReleasesNothing) {
  FakeRaw fake;
  fake.budget = 4 * MiB;
  BlockPool pool(fake.raw());
  pool.deallocate(pool.allocate(2 * MiB, kStream));  // a cached, wholly free 2 MiB segment
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  EXPECT_EQ(pool.allocate(3 * MiB, kStream), nullptr)
      << "the retry would cudaFree inside the capture: fail instead";
  EXPECT_EQ(fake.releases, 0);
  pool.end_private();
  // Outside the window the usual release-and-retry applies.
  void* p = pool.allocate(3 * MiB, kStream);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(fake.releases, 1);
  pool.deallocate(p);
  pool.release_private(graph);
}

TEST(CudaGraphPoolTest, TheAllocationCounterMovesOnlyWithAllocations) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  const std::int64_t start = pool.stats().allocations;
  void* a = pool.allocate(1 * KiB, kStream);
  EXPECT_EQ(pool.stats().allocations, start + 1);
  pool.deallocate(a);
  pool.release_cached();
  EXPECT_EQ(pool.stats().allocations, start + 1) << "frees and releases are not allocations";
  void* b = pool.allocate(1 * KiB, kStream);
  EXPECT_EQ(pool.stats().allocations, start + 2) << "a cache hit counts as an allocation too";
  pool.deallocate(b);
}

// The prefetcher allocates batches on its own thread while the training thread captures: those
// blocks must not come from the graph's pool (a replay would write over a free block of the pool
// that a batch then lives in).
TEST(CudaGraphPoolTest, OtherThreadsAllocateFromTheSharedCacheDuringAWindow) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  const PoolId graph = pool.create_private();
  pool.begin_private(graph);
  void* temp = pool.allocate(64 * KiB, kStream);
  pool.deallocate(temp);  // free in the pool: the graph writes it on every replay
  void* from_thread = nullptr;
  std::thread([&] { from_thread = pool.allocate(64 * KiB, kStream); }).join();
  pool.end_private();
  EXPECT_NE(from_thread, temp);
  EXPECT_EQ(pool.private_stats(graph).allocations, 1);
  EXPECT_EQ(pool.stats().private_allocations, 1);
  pool.deallocate(from_thread);
  pool.release_private(graph);
}

TEST(CudaGraphPoolTest, OneWindowAtATime) {
  FakeRaw fake;
  BlockPool pool(fake.raw());
  const PoolId a = pool.create_private();
  const PoolId b = pool.create_private();
  EXPECT_NE(a, b);
  EXPECT_NE(a, 0u);
  EXPECT_THROW(pool.begin_private(a + b + 100), std::logic_error);
  pool.begin_private(a);
  EXPECT_THROW(pool.begin_private(b), std::logic_error);
  // Releasing the pool of the open window closes it.
  pool.release_private(a);
  EXPECT_EQ(pool.private_window(), 0u);
  pool.begin_private(b);
  pool.end_private();
  pool.release_private(b);
  pool.release_private(b);  // unknown now: ignored
}

// The destructor releases live pools and their held blocks (no leak, no double free: the fake
// checks every release).
TEST(CudaGraphPoolTest, DestroyingTheAllocatorWithALivePoolReleasesItsCache) {
  FakeRaw fake;
  {
    BlockPool pool(fake.raw());
    void* shared = pool.allocate(8 * KiB, kStream);
    const PoolId graph = pool.create_private();
    pool.begin_private(graph);
    pool.deallocate(pool.allocate(8 * KiB, kStream));
    pool.deallocate(shared);  // held
    pool.end_private();
  }
  EXPECT_EQ(fake.releases, fake.allocations);
  EXPECT_EQ(fake.held, 0u);
}

}  // namespace
}  // namespace mixprec::cuda
