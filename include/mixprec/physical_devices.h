// The machine's compute devices, as Keras' tf.config.list_physical_devices shows them: the CPU and
// each CUDA GPU, with what matters for picking a dtype policy (compute capability, memory, native
// float16/bfloat16 arithmetic). `mixprec info` prints this list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/device.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct PhysicalDevice {
  Device device;
  std::string name;  // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3"; "unknown" if unreadable
  std::string kind;  // "CPU" or "GPU"
  // CUDA compute capability (major.minor); 0.0 for the CPU.
  int compute_capability_major = 0, compute_capability_minor = 0;
  std::int64_t memory_bytes = 0;  // host memory for the CPU, device memory for a GPU; 0 if unknown
  // True when the device has float16 / bfloat16 arithmetic (not just conversion) in hardware: on
  // x86, avx512_fp16 or amx_fp16 / avx512_bf16 or amx_bf16.
  bool native_float16 = false;
  bool native_bfloat16 = false;
  // The instruction-set features relevant to 16-bit work that the CPU has, in this order when
  // present: f16c, avx2, avx512f, avx512_bf16, avx512_fp16, amx_bf16, amx_fp16. Empty for a GPU.
  std::vector<std::string> features;

  bool has_feature(std::string_view feature) const;
};

// The CPU first, then the GPUs in CUDA index order. A build without the CUDA backend (or a machine
// without a usable driver) lists no GPU. Never throws: unreadable system information shows as
// "unknown" / 0.
std::vector<PhysicalDevice> list_physical_devices();
// Only the devices of one kind: "CPU" or "GPU" (case-insensitive); any other kind throws
// ValueError.
std::vector<PhysicalDevice> list_physical_devices(std::string_view kind);

}  // namespace mixprec

#pragma GCC visibility pop
