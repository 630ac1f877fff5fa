// The host allocator's block cache (core/host_block_cache.h): size classes, free lists, the bound,
// and through the allocator: blocks of every size come back from the cache, empty_cache frees
// them, and memory_stats counts the requested bytes as before.
#include "core/host_block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "core/allocator.h"
#include "mixprec/mixprec.h"

namespace mixprec::core {
namespace {

TEST(HostSizeClassTest, CoversTheRequestWithBoundedWaste) {
  for (std::size_t bytes = 0; bytes < (std::size_t{9} << 20); bytes = bytes * 9 / 8 + 7) {
    const std::size_t c = host_size_class(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_EQ(c % 64, 0u) << bytes;
    if (bytes > 256 && bytes <= (std::size_t{4} << 20)) {
      EXPECT_LE(c, bytes + bytes / 4) << bytes;  // at most 25% over
    }
    if (bytes > (std::size_t{4} << 20)) {
      EXPECT_EQ(c % (std::size_t{2} << 20), 0u) << bytes;
      EXPECT_LT(c - bytes, std::size_t{2} << 20) << bytes;
    }
    EXPECT_EQ(host_size_class(c), c) << bytes;  // a class is its own class
  }
}

TEST(HostSizeClassTest, ExactValues) {
  EXPECT_EQ(host_size_class(0), 64u);
  EXPECT_EQ(host_size_class(64), 64u);
  EXPECT_EQ(host_size_class(65), 128u);
  EXPECT_EQ(host_size_class(200), 256u);
  EXPECT_EQ(host_size_class(257), 320u);    // (256, 512] in steps of 64
  EXPECT_EQ(host_size_class(4000), 4096u);  // (2048, 4096] in steps of 512
  EXPECT_EQ(host_size_class(4097), 5120u);
  EXPECT_EQ(host_size_class((std::size_t{4} << 20) + 1), std::size_t{6} << 20);
}

TEST(HostBlockCacheTest, ReturnsBlocksOfTheSameClassOnlyAndRespectsTheBound) {
  HostBlockCache cache;
  int a = 0, b = 0, c = 0;
  EXPECT_EQ(cache.take(128), nullptr);
  EXPECT_TRUE(cache.give(&a, 128, 1000));
  EXPECT_TRUE(cache.give(&b, 512, 1000));
  EXPECT_EQ(cache.cached_bytes(), 640u);
  EXPECT_FALSE(cache.give(&c, 512, 1000));  // 1152 > 1000: the caller frees it
  EXPECT_EQ(cache.cached_bytes(), 640u);
  EXPECT_EQ(cache.take(256), nullptr);
  EXPECT_EQ(cache.take(512), &b);
  EXPECT_EQ(cache.take(512), nullptr);
  EXPECT_EQ(cache.cached_bytes(), 128u);
  static std::vector<void*> released;
  released.clear();
  cache.release_all([](void* p) { released.push_back(p); });
  EXPECT_EQ(released, std::vector<void*>{&a});
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_EQ(cache.take(128), nullptr);
}

#if !defined(__SANITIZE_ADDRESS__)
// A step's pattern of small tensors (the many per-channel vectors and SE activations of a CNN):
// after one step, the next asks the system for nothing.
TEST(HostAllocatorCacheTest, SmallBlocksOfEverySizeAreReused) {
  empty_cache();
  const std::vector<std::int64_t> sizes = {1, 10, 100, 1000, 5000, 30000};
  std::set<const void*> first;
  {
    std::vector<Tensor> step;
    for (std::int64_t n : sizes) step.push_back(empty({n}));
    for (const Tensor& t : step) first.insert(t.data_ptr());
  }
  EXPECT_GE(memory_stats().cached_bytes, 4 * (1 + 10 + 100 + 1000 + 5000 + 30000));
  const MemoryStats before = memory_stats();
  {
    std::vector<Tensor> step;
    for (std::int64_t n : sizes) step.push_back(empty({n}));
    for (const Tensor& t : step) EXPECT_TRUE(first.count(t.data_ptr())) << t.numel();
    // memory_stats counts what was asked for, not the size class.
    EXPECT_EQ(memory_stats().current_bytes - before.current_bytes,
              4 * (1 + 10 + 100 + 1000 + 5000 + 30000));
  }
  // A request of another size in the same class gets a cached block too.
  {
    const Tensor t = empty({999});  // 3996 bytes: class 4096, as 4000 bytes
    EXPECT_TRUE(first.count(t.data_ptr()));
  }
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}
#endif

}  // namespace
}  // namespace mixprec::core
