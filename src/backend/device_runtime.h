// Devices, memory and transfers of one device kind: what core (storage, creation, device moves)
// and the public mixprec/cuda.h functions need from a backend. The CPU is a device like any
// other: its runtime allocates host memory and its transfers are copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixprec/device.h"
#include "mixprec/physical_devices.h"
#include "mixprec/tensor.h"

namespace mixprec {

struct DeviceRuntime {
  int (*device_count)();                       // devices of this kind present (0: none usable)
  void (*synchronize)(Device device);          // waits until the device's queued work is done
  std::vector<PhysicalDevice> (*enumerate)();  // for list_physical_devices()

  // Memory of `device`; allocate throws DeviceError when out of memory or the device does not
  // exist, and records the bytes in the memory statistics (core::record_allocation).
  void* (*allocate)(Device device, std::size_t bytes);
  void (*deallocate)(Device device, void* ptr, std::size_t bytes) noexcept;
  std::int64_t (*cached_bytes)(Device device);  // freed bytes kept for reuse
  void (*empty_cache)(Device device);           // returns the cached bytes to the system

  // A copy of src on `target`, where one of src's device and target is this backend's device and
  // the other the CPU (a device move; ordered with the device's queued work).
  Tensor (*transfer)(const Tensor& src, Device target);

  // Times the host has waited for a device of this kind since the process started (a stream or
  // event synchronisation, a blocking copy): mixprec::cuda::host_synchronizations(). Always 0 for
  // the CPU, whose work runs on the calling thread.
  std::int64_t (*host_synchronizations)();
};

}  // namespace mixprec
