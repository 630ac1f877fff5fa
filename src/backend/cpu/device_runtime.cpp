// The CPU backend's DeviceRuntime (backend/device_runtime.h): the host allocator of
// core/allocator.h, one device, nothing to wait for.
#include "backend/device_runtime.h"

#include "core/allocator.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

int device_count() { return 1; }
void synchronize(Device) {}
std::vector<PhysicalDevice> enumerate() { return {}; }  // the host CPU is listed by core
void* allocate(Device, std::size_t bytes) { return core::cpu_allocate(bytes); }
void deallocate(Device, void* ptr, std::size_t bytes) noexcept { core::cpu_deallocate(ptr, bytes); }
std::int64_t cached_bytes(Device) { return static_cast<std::int64_t>(core::cpu_cached_bytes()); }
void empty_cache(Device) { core::cpu_release_cached(); }
std::int64_t host_synchronizations() { return 0; }  // the work runs on the calling thread
// Never reached: a move between two CPU tensors is no move (Tensor::to returns the tensor), and a
// move to or from another device kind goes to that device's backend.
Tensor transfer(const Tensor& src, Device target) {
  throw DeviceError("cannot move a tensor from " + src.device().to_string() + " to " +
                    target.to_string() + " with the CPU backend");
}

}  // namespace

extern const DeviceRuntime kDeviceRuntime;
const DeviceRuntime kDeviceRuntime{.device_count = device_count,
                                   .synchronize = synchronize,
                                   .enumerate = enumerate,
                                   .allocate = allocate,
                                   .deallocate = deallocate,
                                   .cached_bytes = cached_bytes,
                                   .empty_cache = empty_cache,
                                   .transfer = transfer,
                                   .host_synchronizations = host_synchronizations};

}  // namespace mixprec::cpu
