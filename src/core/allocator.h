// Host allocator: 64-byte-aligned blocks with per-device current/peak statistics, which the
// device allocators of the backends (DeviceRuntime::allocate) report to as well.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/device.h"

namespace mixprec::core {

// Returns 64-byte-aligned memory of at least `bytes` (a zero-byte request still returns a unique
// pointer). Throws DeviceError when the system is out of memory.
void* cpu_allocate(std::size_t bytes);
void cpu_deallocate(void* ptr, std::size_t bytes);
// Bytes of freed blocks kept for reuse, by size class (not counted as in use).
std::size_t cpu_cached_bytes();

// Allocators of other devices report their traffic here so memory_stats() sees every device.
void record_allocation(Device device, std::size_t bytes);
void record_deallocation(Device device, std::size_t bytes);

// Returns the freed blocks kept for reuse to the system.
void cpu_release_cached();

}  // namespace mixprec::core
