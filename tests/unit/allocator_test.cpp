// Host allocator: memory_stats bookkeeping and alignment. Statistics are process-wide, so every
// check works on differences from a snapshot taken at the start of the test.
#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

std::uintptr_t address(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); }

TEST(AllocatorTest, CurrentBytesFollowTensorLifetimes) {
  const MemoryStats before = memory_stats();
  std::optional<Tensor> a = zeros({1000}, {.dtype = kFloat32});  // 4000 bytes
  MemoryStats now = memory_stats();
  EXPECT_EQ(now.current_bytes - before.current_bytes, 4000);
  EXPECT_EQ(now.allocations - before.allocations, 1);

  std::optional<Tensor> b = zeros({10, 10}, {.dtype = kFloat16});  // 200 bytes
  now = memory_stats();
  EXPECT_EQ(now.current_bytes - before.current_bytes, 4200);
  EXPECT_EQ(now.allocations - before.allocations, 2);

  // A view does not allocate; the storage lives while any view of it does.
  std::optional<Tensor> view = a->reshape({10, 100}).transpose(0, 1);
  EXPECT_EQ(memory_stats().current_bytes - before.current_bytes, 4200);
  EXPECT_EQ(memory_stats().allocations - before.allocations, 2);
  a.reset();
  EXPECT_EQ(memory_stats().current_bytes - before.current_bytes, 4200);
  view.reset();
  EXPECT_EQ(memory_stats().current_bytes - before.current_bytes, 200);
  b.reset();
  now = memory_stats();
  EXPECT_EQ(now.current_bytes, before.current_bytes);
  EXPECT_EQ(now.allocations - before.allocations, 2);  // a count of allocations made, not live
  EXPECT_GE(now.peak_bytes, before.current_bytes + 4200);
}

TEST(AllocatorTest, PeakTracksTheHighWaterMarkAndResets) {
  reset_peak_memory_stats();
  const MemoryStats start = memory_stats();
  EXPECT_EQ(start.peak_bytes, start.current_bytes);
  {
    const Tensor big = empty({1 << 20}, {.dtype = kFloat64});  // 8 MiB
    const Tensor small = empty({16}, {.dtype = kUInt8});
    EXPECT_EQ(memory_stats().peak_bytes - start.current_bytes, (8 << 20) + 16);
  }
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.current_bytes, start.current_bytes);
  EXPECT_EQ(after.peak_bytes - start.current_bytes, (8 << 20) + 16);  // the peak stays
  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_bytes, memory_stats().current_bytes);
  {
    const Tensor medium = empty({1000}, {.dtype = kInt32});
    EXPECT_EQ(memory_stats().peak_bytes - start.current_bytes, 4000);
  }
}

TEST(AllocatorTest, OpsReleaseTheirTemporaries) {
  const Tensor x = random_uniform({64, 32}, -1.0, 1.0);
  const std::int64_t before = memory_stats().current_bytes;
  {
    Tensor y = sum(exp(x) * x + 1.0, {1});
    EXPECT_EQ(memory_stats().current_bytes - before, 64 * 4);  // only y is left
  }
  EXPECT_EQ(memory_stats().current_bytes, before);
  {
    Tensor w = random_normal({32, 8}).set_requires_grad(true);
    Tensor loss = sum(relu(w) * 2.0);
    loss.backward();
  }
  EXPECT_EQ(memory_stats().current_bytes, before);  // the graph and gradients are freed with w
}

TEST(AllocatorTest, DataIs64ByteAligned) {
  const DType dtypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kBool};
  for (DType dtype : dtypes) {
    for (std::int64_t n : {0, 1, 3, 17, 64, 1000}) {
      const Tensor t = empty({n}, {.dtype = dtype});
      EXPECT_EQ(address(t) % 64, 0u) << dtype_name(dtype) << " n=" << n;
    }
  }
  void* p = core::cpu_allocate(5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  core::cpu_deallocate(p, 5);
}

TEST(AllocatorTest, ZeroByteAllocationsAreDistinct) {
  const std::int64_t before = memory_stats().current_bytes;
  void* a = core::cpu_allocate(0);
  void* b = core::cpu_allocate(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(memory_stats().current_bytes, before);
  core::cpu_deallocate(a, 0);
  core::cpu_deallocate(b, 0);
}

TEST(AllocatorTest, OtherDevicesKeepTheirOwnCounters) {
  const MemoryStats cpu_before = memory_stats(Device::cpu());
  const MemoryStats gpu_before = memory_stats(Device::cuda(3));
  core::record_allocation(Device::cuda(3), 1024);
  EXPECT_EQ(memory_stats(Device::cuda(3)).current_bytes - gpu_before.current_bytes, 1024);
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, cpu_before.current_bytes);
  core::record_deallocation(Device::cuda(3), 1024);
  EXPECT_EQ(memory_stats(Device::cuda(3)).current_bytes, gpu_before.current_bytes);
  EXPECT_THROW(memory_stats(Device::cuda(99)), DeviceError);
}

}  // namespace
}  // namespace mixprec

// Large freed blocks are kept and reused, so a training step's same-sized activations do not
// fault in fresh pages every step; empty_cache() hands them back.
TEST(AllocatorCacheTest, LargeBlocksAreReusedAndCanBeReleased) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the block cache is disabled under AddressSanitizer";
#else
  mixprec::empty_cache();
  EXPECT_EQ(mixprec::memory_stats().cached_bytes, 0);
  const void* first = nullptr;
  {
    auto t = mixprec::zeros({1 << 20});  // 4 MiB
    first = t.data_ptr();
  }
  EXPECT_GE(mixprec::memory_stats().cached_bytes, std::int64_t{4} << 20);
  {
    auto t = mixprec::ones({1 << 20});
    EXPECT_EQ(t.data_ptr(), first);  // the cached block came back
    EXPECT_EQ(t.to_vector<float>()[12345], 1.0f);
  }
  const auto before = mixprec::memory_stats();
  mixprec::empty_cache();
  EXPECT_EQ(mixprec::memory_stats().cached_bytes, 0);
  EXPECT_EQ(mixprec::memory_stats().current_bytes,
            before.current_bytes);  // in-use bytes unaffected
#endif
}
