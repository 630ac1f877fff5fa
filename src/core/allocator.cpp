#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "core/host_block_cache.h"
#include "core/peak_trace.h"
#include "mixprec/error.h"
#include "mixprec/memory.h"

namespace mixprec {

namespace {

constexpr std::size_t kAlignment = 64;  // one cache line; also the widest SIMD load (AVX-512)
constexpr int kMaxDevices = 17;         // slot 0: CPU, slots 1..16: CUDA devices

struct Counters {
  std::atomic<std::int64_t> current{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> allocations{0};
};

Counters& counters(Device device) {
  static Counters table[kMaxDevices];
  const int slot = device.is_cpu() ? 0 : 1 + device.index;
  if (slot < 0 || slot >= kMaxDevices) {
    throw DeviceError("device index out of range: " + device.to_string());
  }
  return table[slot];
}

}  // namespace

namespace core {

void record_allocation(Device device, std::size_t bytes) {
  Counters& c = counters(device);
  const auto now =
      c.current.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
  auto peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.allocations.fetch_add(1);
}

void record_deallocation(Device device, std::size_t bytes) {
  counters(device).current.fetch_sub(static_cast<std::int64_t>(bytes));
}

// Every block is cached by size class and reused (core/host_block_cache.h): a training step
// allocates the same activation and gradient sizes every time, and returning them to glibc means
// fresh pages that fault in (and are zeroed by the kernel) on every step: mmap()ed large blocks,
// and small ones too when glibc trims its heap or maps a block above its mmap threshold. Measured
// on the seed MLP (784-4096-4096-10, batch 256, 2 cores): 131 -> 108 ms per float32 step when
// blocks of 256 KiB and more were cached; caching every size removes the remaining faults of the
// CNN steps (many small tensors).
namespace {

std::size_t cache_limit() {
  // MIXPREC_HOST_CACHE_BYTES overrides the default of 2 GiB; 0 disables the cache.
  static const std::size_t limit = [] {
#if defined(__SANITIZE_ADDRESS__)
    return std::size_t{0};  // keep AddressSanitizer's use-after-free checks meaningful
#else
    const char* env = std::getenv("MIXPREC_HOST_CACHE_BYTES");
    if (env != nullptr && *env != '\0')
      return static_cast<std::size_t>(std::strtoull(env, nullptr, 10));
    return std::size_t{2} << 30;
#endif
  }();
  return limit;
}

HostBlockCache& block_cache() {
  static HostBlockCache* cache =
      new HostBlockCache();  // never destroyed: tensors may outlive statics
  return *cache;
}

void* system_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

void system_free(void* ptr) { std::free(ptr); }

}  // namespace

void* cpu_allocate(std::size_t bytes) {
  const bool cached = cache_limit() > 0;
  const std::size_t request = cached ? host_size_class(bytes) : bytes;
  void* ptr = cached ? block_cache().take(request) : nullptr;
  if (ptr == nullptr) ptr = system_allocate(request);
  if (ptr == nullptr && cached) {  // give the cache back to the system and try once more
    block_cache().release_all(system_free);
    ptr = system_allocate(request);
  }
  if (ptr == nullptr) {
    const auto stats = memory_stats(Device::cpu());
    throw DeviceError("out of host memory: requested " + std::to_string(bytes) + " bytes with " +
                      std::to_string(stats.current_bytes) +
                      " bytes in use; try a smaller batch size");
  }
  record_allocation(Device::cpu(), bytes);
  peak_trace_allocated(ptr, bytes);
  return ptr;
}

void cpu_deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  peak_trace_freed(ptr);
  record_deallocation(Device::cpu(), bytes);
  const std::size_t limit = cache_limit();
  if (limit > 0 && block_cache().give(ptr, host_size_class(bytes), limit)) return;
  std::free(ptr);
}

void cpu_release_cached() { block_cache().release_all(system_free); }

std::size_t cpu_cached_bytes() { return block_cache().cached_bytes(); }

}  // namespace core

MemoryStats memory_stats(Device device) {
  Counters& c = counters(device);
  MemoryStats stats{c.current.load(), c.peak.load(), c.allocations.load(), 0};
  // A device kind this build has no backend for has allocated nothing: nothing is cached either.
  const Backend* backend = find_backend(device.type);
  stats.cached_bytes = backend == nullptr ? 0 : backend->runtime->cached_bytes(device);
  return stats;
}

void empty_cache(Device device) {
  counters(device);  // validates the index
  if (const Backend* backend = find_backend(device.type)) backend->runtime->empty_cache(device);
}

void reset_peak_memory_stats(Device device) {
  Counters& c = counters(device);
  c.peak.store(c.current.load());
}

}  // namespace mixprec
