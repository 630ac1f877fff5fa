#include "backend/cuda/allocator.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/context.h"
#include "backend/cuda/host_waits.h"
#include "core/allocator.h"
#include "mixprec/error.h"
#include "mixprec/memory.h"

namespace mixprec::cuda {

namespace {

struct Pools {
  std::mutex mutex;
  std::vector<std::unique_ptr<BlockPool>> by_device;
};

Pools& pools() {
  static Pools* p = new Pools();  // never destroyed: tensors may outlive static objects
  return *p;
}

// The pool of a device, created on first use. nullptr (when `create` is false) for a device whose
// pool does not exist yet.
BlockPool* pool(int index, bool create) {
  Pools& p = pools();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.by_device.size() <= static_cast<std::size_t>(index)) {
    if (!create) return nullptr;
    p.by_device.resize(static_cast<std::size_t>(index) + 1);
  }
  auto& slot = p.by_device[static_cast<std::size_t>(index)];
  if (!slot && create) {
    RawMemory raw;
    raw.allocate = [index](std::size_t bytes) -> void* {
      DeviceGuard guard(index);
      void* ptr = nullptr;
      // Inside a stream capture of this thread (a CUDA graph's private pool drawing a segment)
      // cudaMalloc counts as a potentially unsafe call: it is made in relaxed mode, as PyTorch's
      // graph pools do (a captured graph keeps its addresses; replays allocate nothing). Outside
      // a capture the exchange changes nothing.
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
      const cudaError_t status = cudaMalloc(&ptr, bytes);
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      if (status == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky: clear it and report through nullptr
        return nullptr;
      }
      check(status, "cudaMalloc");
      return ptr;
    };
    raw.release = [index](void* ptr) {
      DeviceGuard guard(index);
      // cudaFree synchronises the device, so no queued work can still use the segment.
      count_host_wait();
      (void)cudaFree(ptr);
    };
    slot = std::make_unique<BlockPool>(std::move(raw));
  }
  return slot.get();
}

[[noreturn]] void throw_out_of_memory(int index, std::size_t bytes) {
  const Device device = Device::cuda(index);
  std::size_t free_bytes = 0, total_bytes = 0;
  {
    DeviceGuard guard(index);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
  }
  const MemoryStats stats = memory_stats(device);
  throw DeviceError("CUDA out of memory: tried to allocate " +
                    format_bytes(static_cast<std::int64_t>(bytes)) + " on " + device.to_string() +
                    " (" + format_bytes(static_cast<std::int64_t>(free_bytes)) + " free of " +
                    format_bytes(static_cast<std::int64_t>(total_bytes)) + "; " +
                    format_bytes(stats.current_bytes) +
                    " held by mixprec tensors); try a smaller --batch-size, or free tensors you "
                    "no longer need");
}

}  // namespace

std::string format_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) value /= 1024.0, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

void* try_allocate(Device device, std::size_t bytes) {
  const int index = require_device(device);
  const cudaStream_t stream = context(index).compute;
  void* ptr = pool(index, true)->allocate(bytes, reinterpret_cast<StreamId>(stream));
  if (ptr != nullptr) core::record_allocation(device, bytes);
  return ptr;
}

void* allocate(Device device, std::size_t bytes) {
  void* ptr = try_allocate(device, bytes);
  if (ptr == nullptr) throw_out_of_memory(require_device(device), bytes);
  return ptr;
}

void deallocate(Device device, void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr || !device.is_cuda() || device.index < 0) return;
  BlockPool* p = pool(device.index, false);
  if (p != nullptr && p->deallocate(ptr)) core::record_deallocation(device, bytes);
}

AllocatorStats allocator_stats(Device device) {
  AllocatorStats s;
  if (!device.is_cuda() || device.index < 0) return s;
  BlockPool* p = pool(device.index, false);
  if (p == nullptr) return s;
  const PoolStats ps = p->stats();
  s.device_mallocs = ps.segment_allocations;
  s.device_frees = ps.segment_releases;
  s.reserved_bytes = ps.reserved_bytes;
  s.allocated_bytes = ps.allocated_bytes;
  s.cached_bytes = ps.cached_bytes();
  s.allocations = ps.allocations;
  s.graph_allocations = ps.private_allocations;
  s.graph_reserved_bytes = ps.private_reserved_bytes;
  return s;
}

PoolId create_graph_pool(Device device) {
  return pool(require_device(device), true)->create_private();
}

void begin_graph_pool(Device device, PoolId id) {
  try {
    pool(require_device(device), true)->begin_private(id);
  } catch (const std::logic_error& e) {
    throw DeviceError(std::string(e.what()) + " on " + device.to_string());
  }
}

void end_graph_pool(Device device) noexcept {
  if (!device.is_cuda() || device.index < 0) return;
  if (BlockPool* p = pool(device.index, false)) p->end_private();
}

void release_graph_pool(Device device, PoolId id) noexcept {
  if (!device.is_cuda() || device.index < 0) return;
  if (BlockPool* p = pool(device.index, false)) p->release_private(id);
}

PrivatePoolStats graph_pool_stats(Device device, PoolId id) {
  if (!device.is_cuda() || device.index < 0) return {};
  BlockPool* p = pool(device.index, false);
  return p == nullptr ? PrivatePoolStats{} : p->private_stats(id);
}

std::size_t release_cached(Device device) {
  if (!device.is_cuda() || device.index < 0) return 0;
  BlockPool* p = pool(device.index, false);
  return p == nullptr ? 0 : p->release_cached();
}

}  // namespace mixprec::cuda
