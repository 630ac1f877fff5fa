// Host allocator: 64-byte-aligned blocks with per-device current/peak statistics; the hooks of the
// device allocators.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/device.h"

namespace mixprec::core {

// Returns 64-byte-aligned memory of at least `bytes` (a zero-byte request still returns a unique
// pointer). Throws DeviceError when the system is out of memory.
void* cpu_allocate(std::size_t bytes);
void cpu_deallocate(void* ptr, std::size_t bytes);
// Bytes of freed large blocks kept for reuse (not counted as in use).
std::size_t cpu_cached_bytes();

// Allocators of other devices report their traffic here so memory_stats() sees every device.
void record_allocation(Device device, std::size_t bytes);
void record_deallocation(Device device, std::size_t bytes);

// Memory of non-CPU devices (CUDA GPUs). Core declares these and the CUDA backend defines them
// (src/backend/cuda/allocator.cpp: its caching allocator); a build without the backend links
// src/backend/cuda/unavailable.cpp instead, where device_allocate throws DeviceError ("no CUDA
// backend") and the others do nothing. device_allocate throws DeviceError for a device that does
// not exist and when out of memory; it records the bytes with record_allocation.
void* device_allocate(Device device, std::size_t bytes);
void device_deallocate(Device device, void* ptr, std::size_t bytes) noexcept;
// Bytes of freed blocks the device's allocator keeps for reuse; 0 for a device never used.
std::int64_t device_cached_bytes(Device device);
// Returns the device allocator's cached blocks to the driver (cudaFree).
void device_empty_cache(Device device);

}  // namespace mixprec::core
