// Internal hooks of list_physical_devices(): the GPU enumerator (by default the CUDA backend's,
// replaceable so that tests can list fake GPUs), and the parser of /proc text for tests.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "mixprec/physical_devices.h"

namespace mixprec::core {

// Returns the GPUs in CUDA index order (kind "GPU", device cuda:i). It must treat a missing driver
// or "driver version is insufficient" as zero GPUs (DESIGN §3); should it throw anyway,
// list_physical_devices() logs one warning and lists no GPU.
using GpuEnumerator = std::function<std::vector<PhysicalDevice>()>;

// Installs the enumerator (replacing any earlier one) and returns the previous one; an empty
// function removes it. With none registered there are no GPUs. Thread-safe. The initial one is
// enumerate_cuda_gpus.
GpuEnumerator register_gpu_enumerator(GpuEnumerator enumerator);

// The CUDA GPUs (name, compute capability, memory) as the CUDA backend sees them
// (DeviceRuntime::enumerate); empty in a build without the backend and on a machine without a
// usable GPU or driver.
std::vector<PhysicalDevice> enumerate_cuda_gpus();

// The CPU entry built from the text of /proc/cpuinfo and /proc/meminfo (either may be empty or
// malformed: the name is then "unknown", memory 0, features empty). Uses the first processor's
// "model name" and "flags" lines (ARM kernels: "Hardware"/"Processor" and "Features").
PhysicalDevice describe_cpu(std::string_view cpuinfo, std::string_view meminfo);

}  // namespace mixprec::core
