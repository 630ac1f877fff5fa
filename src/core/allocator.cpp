#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

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
  const auto now = c.current.fetch_add(static_cast<std::int64_t>(bytes)) +
                   static_cast<std::int64_t>(bytes);
  auto peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.allocations.fetch_add(1);
}

void record_deallocation(Device device, std::size_t bytes) {
  counters(device).current.fetch_sub(static_cast<std::int64_t>(bytes));
}

void* cpu_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (ptr == nullptr) {
    const auto stats = memory_stats(Device::cpu());
    throw DeviceError("out of host memory: requested " + std::to_string(bytes) +
                      " bytes with " + std::to_string(stats.current_bytes) +
                      " bytes in use; try a smaller batch size");
  }
  record_allocation(Device::cpu(), bytes);
  return ptr;
}

void cpu_deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  record_deallocation(Device::cpu(), bytes);
}

}  // namespace core

MemoryStats memory_stats(Device device) {
  Counters& c = counters(device);
  return {c.current.load(), c.peak.load(), c.allocations.load()};
}

void reset_peak_memory_stats(Device device) {
  Counters& c = counters(device);
  c.peak.store(c.current.load());
}

}  // namespace mixprec
