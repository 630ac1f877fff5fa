// The CUDA GPUs for list_physical_devices() (and so for `mixprec info`, the policy compatibility
// check and pick_policy_for_device): name, compute capability and memory of each, read with
// cudaGetDeviceProperties, which creates no GPU context.
#include <vector>

#include "backend/cuda/context.h"
#include "mixprec/physical_devices.h"

namespace mixprec::cuda {

std::vector<PhysicalDevice> enumerate_gpus() {
  std::vector<PhysicalDevice> gpus;
  const int count = visible_device_count();  // 0 without a usable driver: no exception
  for (int i = 0; i < count; ++i) {
    const DeviceInfo& info = device_info(i);
    PhysicalDevice d;
    d.device = Device::cuda(i);
    d.kind = "GPU";
    d.name = info.name.empty() ? "unknown" : info.name;
    d.compute_capability_major = info.major;
    d.compute_capability_minor = info.minor;
    d.memory_bytes = info.total_memory;
    // float16 arithmetic in hardware since compute capability 5.3 (and float16 tensor cores since
    // 7.0); bfloat16 arithmetic and tensor cores since 8.0 (Ampere).
    d.native_float16 = info.major > 5 || (info.major == 5 && info.minor >= 3);
    d.native_bfloat16 = info.major >= 8;
    gpus.push_back(std::move(d));
  }
  return gpus;
}

}  // namespace mixprec::cuda
