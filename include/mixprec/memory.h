// Memory statistics per device, kept by the allocators that back every tensor.
#pragma once

#include <cstdint>

#include "mixprec/device.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct MemoryStats {
  std::int64_t current_bytes = 0;  // bytes held by live tensors now
  std::int64_t peak_bytes = 0;     // largest current_bytes since start or the last reset
  std::int64_t allocations = 0;    // number of allocations made
  std::int64_t cached_bytes = 0;   // freed blocks the allocator keeps for reuse (not in use)
};

MemoryStats memory_stats(Device device = Device::cpu());
// Sets peak_bytes to current_bytes, to measure the peak of one phase (one training step, say).
void reset_peak_memory_stats(Device device = Device::cpu());
// Returns the allocator's cached free blocks to the system. The CPU allocator caches freed blocks
// of every size by size class (up to 2 GiB in all; MIXPREC_HOST_CACHE_BYTES sets the limit, 0
// disables).
void empty_cache(Device device = Device::cpu());

}  // namespace mixprec

#pragma GCC visibility pop
