// The CUDA caching allocator: one BlockPool (caching_allocator.h) per GPU drawing on cudaMalloc,
// every block for that GPU's compute stream. Storage allocates through core::device_allocate
// (core/allocator.h), which lands here; memory_stats(Device::cuda(i)) sees the requested bytes,
// and its cached_bytes the pool's free blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/caching_allocator.h"
#include "mixprec/device.h"

namespace mixprec::cuda {

// A block of at least `bytes` on `device`, usable by work on its compute stream. Throws
// DeviceError when the device does not exist, or when it is out of memory after the cache was
// released: "CUDA out of memory: tried to allocate 2.00 GiB on cuda:0 (1.25 GiB free of 79.11 GiB;
// 70.50 GiB held by mixprec tensors); try a smaller --batch-size".
void* allocate(Device device, std::size_t bytes);
// The same, but nullptr instead of the out-of-memory error (for memory that is worth having but
// not essential, e.g. a cuDNN workspace when an algorithm with less exists). Throws DeviceError
// for a device that does not exist.
void* try_allocate(Device device, std::size_t bytes);
// Returns a block to the cache (stream-ordered: work already queued on the compute stream may still
// use it). Never throws; a pointer the allocator does not know is ignored.
void deallocate(Device device, void* ptr, std::size_t bytes) noexcept;

struct AllocatorStats {
  std::int64_t device_mallocs = 0;        // cudaMalloc calls that succeeded, since start
  std::int64_t device_frees = 0;          // cudaFree calls, since start
  std::int64_t reserved_bytes = 0;        // held from cudaMalloc now
  std::int64_t allocated_bytes = 0;       // in blocks handed out now (rounded sizes)
  std::int64_t cached_bytes = 0;          // reserved but free (reusable without cudaMalloc)
  std::int64_t allocations = 0;           // blocks handed out (cache hits too), since start
  std::int64_t graph_allocations = 0;     // of those, into a CUDA graph's private pool
  std::int64_t graph_reserved_bytes = 0;  // in segments of live graph pools
};
// All zero for a GPU the allocator has not used yet.
AllocatorStats allocator_stats(Device device);
// Releases the cached (wholly free) segments of `device` with cudaFree; returns the bytes freed.
std::size_t release_cached(Device device);

// CUDA graphs (caching_allocator.h, "Private pools"): a pool per graph on `device`, the window
// during which the calling thread's allocations go to it (the capture), and its release once the
// graph is destroyed and its replays have finished. begin_graph_pool throws DeviceError when a
// window is open already on the device.
PoolId create_graph_pool(Device device);
void begin_graph_pool(Device device, PoolId pool);
void end_graph_pool(Device device) noexcept;
void release_graph_pool(Device device, PoolId pool) noexcept;
PrivatePoolStats graph_pool_stats(Device device, PoolId pool);

// "1.50 GiB", "512.00 KiB", "100 B": sizes in error messages.
std::string format_bytes(std::int64_t bytes);

}  // namespace mixprec::cuda
