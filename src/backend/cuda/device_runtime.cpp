// The CUDA backend's DeviceRuntime (backend/device_runtime.h): devices found lazily (a build with
// the backend runs on machines without a driver), the caching allocator, pinned transfers.
#include "backend/device_runtime.h"

#include "backend/cuda/allocator.h"
#include "backend/cuda/context.h"
#include "backend/cuda/host_waits.h"
#include "backend/cuda/transfer.h"

namespace mixprec::cuda {

std::vector<PhysicalDevice> enumerate_gpus();  // device_discovery.cpp

namespace {

std::int64_t cached_bytes(Device device) { return allocator_stats(device).cached_bytes; }
void empty_cache(Device device) { release_cached(device); }

}  // namespace

extern const DeviceRuntime kDeviceRuntime;
const DeviceRuntime kDeviceRuntime{.device_count = visible_device_count,
                                   .synchronize = synchronize_device,
                                   .enumerate = enumerate_gpus,
                                   .allocate = allocate,
                                   .deallocate = deallocate,
                                   .cached_bytes = cached_bytes,
                                   .empty_cache = empty_cache,
                                   .transfer = to_device,
                                   .host_synchronizations = host_waits};

}  // namespace mixprec::cuda
