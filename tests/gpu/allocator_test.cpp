// The CUDA caching allocator on a GPU: a second allocation of a freed size makes no cudaMalloc,
// memory_stats(cuda) follows tensor lifetimes (current, peak, cached), empty_cache returns the
// cache to the driver, a steady loop of ops stops calling cudaMalloc, and out of memory is a
// DeviceError with the request, the free memory and advice (try_allocate: nullptr).
#include "backend/cuda/allocator.h"

#include <optional>

#include "gpu/op_harness.h"
#include "support/expect_error.h"

namespace mixprec::testing {
namespace {

TEST(GpuAllocatorTest, ReusingAFreedSizeMakesNoCudaMalloc) {
  MIXPREC_REQUIRE_GPU();
  std::optional<Tensor> t = empty({1000, 1000}, {.device = kGpu});  // 4 MB: a large block
  const void* first = t->data_ptr();
  t.reset();
  const std::int64_t mallocs = cuda::allocator_stats(kGpu).device_mallocs;
  t = empty({1000, 1000}, {.device = kGpu});
  EXPECT_EQ(cuda::allocator_stats(kGpu).device_mallocs, mallocs);
  EXPECT_EQ(t->data_ptr(), first);
  // Small tensors share 2 MiB segments: a hundred of them need at most one more cudaMalloc.
  std::vector<Tensor> small;
  for (int i = 0; i < 100; ++i) small.push_back(empty({100}, {.device = kGpu}));
  EXPECT_LE(cuda::allocator_stats(kGpu).device_mallocs - mallocs, 1);
}

TEST(GpuAllocatorTest, MemoryStatsFollowTensorLifetimes) {
  MIXPREC_REQUIRE_GPU();
  reset_peak_memory_stats(kGpu);
  const MemoryStats before = memory_stats(kGpu);
  {
    const Tensor a = empty({1 << 20}, {.device = kGpu});                     // 4 MiB
    const Tensor b = empty({1 << 19}, {.dtype = kFloat16, .device = kGpu});  // 1 MiB
    const MemoryStats during = memory_stats(kGpu);
    EXPECT_EQ(during.current_bytes - before.current_bytes, (4 << 20) + (1 << 20));
    EXPECT_EQ(during.allocations - before.allocations, 2);
    EXPECT_EQ(during.peak_bytes - before.current_bytes, (4 << 20) + (1 << 20));
  }
  const MemoryStats after = memory_stats(kGpu);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_EQ(after.peak_bytes - before.current_bytes, (4 << 20) + (1 << 20));
  EXPECT_GE(after.cached_bytes, (4 << 20) + (1 << 20));  // freed blocks stay cached
}

TEST(GpuAllocatorTest, EmptyCacheReturnsFreeSegments) {
  MIXPREC_REQUIRE_GPU();
  { const Tensor t = empty({16 << 20}, {.device = kGpu}); }  // 64 MiB, freed into the cache
  const cuda::AllocatorStats cached = cuda::allocator_stats(kGpu);
  EXPECT_GE(cached.cached_bytes, std::int64_t{64} << 20);
  empty_cache(kGpu);
  const cuda::AllocatorStats released = cuda::allocator_stats(kGpu);
  EXPECT_GT(released.device_frees, cached.device_frees);
  EXPECT_LE(released.cached_bytes, cached.cached_bytes - (std::int64_t{64} << 20));
  EXPECT_EQ(memory_stats(kGpu).cached_bytes, released.cached_bytes);
}

// A training-like step of elementwise ops, reductions, casts and matmuls: after the first step
// every size is cached and no later step calls cudaMalloc.
TEST(GpuAllocatorTest, ASteadyStepLoopMakesNoCudaMalloc) {
  MIXPREC_REQUIRE_GPU();
  Tensor w = on_gpu(sample({64, 32}, -0.1, 0.1, kFloat32, 1), true);
  const Tensor x = on_gpu(sample({128, 64}, -1, 1, kFloat32, 2));
  const auto step = [&] {
    const Tensor h = relu(matmul(x.to(kFloat16), w.to(kFloat16)));
    const Tensor loss = mean(mul(h, h).to(kFloat32));
    const std::vector<Tensor> g = grad(loss, {w});
    NoGradScope no_grad;
    w.assign(sub(w, mul(g[0], 0.01)));
  };
  step();
  step();
  const std::int64_t mallocs = cuda::allocator_stats(kGpu).device_mallocs;
  for (int i = 0; i < 10; ++i) step();
  cuda::synchronize(kGpu);
  EXPECT_EQ(cuda::allocator_stats(kGpu).device_mallocs, mallocs);
}

TEST(GpuAllocatorTest, OutOfMemoryIsADeviceErrorWithAdvice) {
  MIXPREC_REQUIRE_GPU();
  const MemoryStats before = memory_stats(kGpu);
  // 1 PiB: more than any GPU has.
  expect_error<DeviceError>(
      [] { empty({std::int64_t{1} << 50}, {.dtype = kUInt8, .device = kGpu}); },
      {"CUDA out of memory", "tried to allocate 1.00 PiB", "on cuda:0", "free of", "--batch-size"});
  EXPECT_EQ(memory_stats(kGpu).current_bytes, before.current_bytes);
  // try_allocate (a cuDNN workspace that an algorithm with less can replace): nullptr, no error,
  // nothing counted.
  EXPECT_EQ(cuda::try_allocate(kGpu, std::size_t{1} << 50), nullptr);
  EXPECT_EQ(memory_stats(kGpu).current_bytes, before.current_bytes);
  // The allocator still works afterwards.
  EXPECT_NO_THROW(empty({1024}, {.device = kGpu}));
  void* block = cuda::try_allocate(kGpu, 4096);
  ASSERT_NE(block, nullptr);
  cuda::deallocate(kGpu, block, 4096);
}

TEST(GpuAllocatorTest, AGpuThatDoesNotExistIsNamed) {
  MIXPREC_REQUIRE_GPU();
  const Device missing = Device::cuda(cuda::device_count());
  expect_error<DeviceError>([&] { empty({4}, {.device = missing}); },
                            {missing.to_string(), "this machine has"});
}

}  // namespace
}  // namespace mixprec::testing
