#include "mixprec/mixed_precision/device_compatibility.h"

#include <exception>
#include <string_view>

#include "mixprec/logging.h"

namespace mixprec::mixed_precision {

namespace {

// Volta (7.0) introduced float16 tensor cores; Ampere (8.0) added bfloat16 ones.
constexpr int kFloat16TensorCoreMajor = 7;
constexpr int kBFloat16TensorCoreMajor = 8;

bool is_gpu(const PhysicalDevice& d) { return d.kind == "GPU"; }

// "cuda:0 NVIDIA H100 80GB HBM3 (compute capability 9.0)"
std::string describe_gpu(const PhysicalDevice& d) {
  return d.device.to_string() + " " + d.name + " (compute capability " +
         std::to_string(d.compute_capability_major) + "." +
         std::to_string(d.compute_capability_minor) + ")";
}

std::string describe_gpus(const std::vector<PhysicalDevice>& devices) {
  std::string out;
  for (const PhysicalDevice& d : devices) {
    if (!is_gpu(d)) continue;
    if (!out.empty()) out += ", ";
    out += describe_gpu(d);
  }
  return out;
}

const PhysicalDevice* first_gpu_with_major(const std::vector<PhysicalDevice>& devices, int major) {
  for (const PhysicalDevice& d : devices) {
    if (is_gpu(d) && d.compute_capability_major >= major) return &d;
  }
  return nullptr;
}

const PhysicalDevice* find_cpu(const std::vector<PhysicalDevice>& devices) {
  for (const PhysicalDevice& d : devices) {
    if (d.kind == "CPU") return &d;
  }
  return nullptr;
}

bool has_any_gpu(const std::vector<PhysicalDevice>& devices) {
  for (const PhysicalDevice& d : devices) {
    if (is_gpu(d)) return true;
  }
  return false;
}

// "avx512_bf16, amx_bf16": the native bfloat16 features the CPU has.
std::string bf16_features(const PhysicalDevice& cpu) {
  std::string out;
  for (std::string_view f : {"avx512_bf16", "amx_bf16"}) {
    if (!cpu.has_feature(f)) continue;
    if (!out.empty()) out += ", ";
    out += f;
  }
  return out;
}

std::string cpu_name(const PhysicalDevice* cpu) {
  return cpu != nullptr ? "the CPU (" + cpu->name + ")" : "the CPU";
}

// One line each (the log prints it once per process); the policy's name is added by the caller.
std::string float16_warning(const std::vector<PhysicalDevice>& devices) {
  if (first_gpu_with_major(devices, kFloat16TensorCoreMajor) != nullptr) return {};
  if (has_any_gpu(devices)) {
    return "may run slowly: no GPU here has compute capability 7.0 or higher (float16 tensor "
           "cores); found: " +
           describe_gpus(devices);
  }
  const PhysicalDevice* cpu = find_cpu(devices);
  const bool bf16 = cpu != nullptr && cpu->native_bfloat16;
  return "no usable GPU (compute capability 7.0 or higher), so it runs on " + cpu_name(cpu) +
         ": correct, but slower than float32; use " +
         (bf16 ? std::string("mixed_bfloat16 on this CPU (native bfloat16)")
               : std::string("float32 on this CPU"));
}

std::string bfloat16_warning(const std::vector<PhysicalDevice>& devices) {
  const PhysicalDevice* cpu = find_cpu(devices);
  if (cpu != nullptr && cpu->native_bfloat16) return {};
  if (first_gpu_with_major(devices, kBFloat16TensorCoreMajor) != nullptr) return {};
  std::string text = cpu_name(cpu) + " has no native bfloat16 (avx512_bf16 or AMX-BF16)";
  if (has_any_gpu(devices)) {
    text +=
        " and no GPU here has compute capability 8.0 or higher (found: " + describe_gpus(devices) +
        ")";
  }
  return text + ": half the activation memory, but no compute speed-up over float32";
}

}  // namespace

PolicyChoice pick_policy_for_device(const std::vector<PhysicalDevice>& devices) {
  if (const PhysicalDevice* gpu = first_gpu_with_major(devices, kFloat16TensorCoreMajor)) {
    return {Policy("mixed_float16"),
            "GPU " + describe_gpu(*gpu) +
                " has float16 tensor cores (compute capability >= 7.0): mixed_float16 computes "
                "in float16 with float32 variables and loss scaling"};
  }
  const PhysicalDevice* cpu = find_cpu(devices);
  if (cpu != nullptr && cpu->native_bfloat16) {
    return {Policy("mixed_bfloat16"),
            "CPU " + cpu->name + " has native bfloat16 arithmetic (" + bf16_features(*cpu) +
                ") and no GPU of compute capability >= 7.0 is present: mixed_bfloat16 computes "
                "in bfloat16 with float32 variables, needing no loss scaling"};
  }
  std::string reason = "no GPU of compute capability >= 7.0 (";
  reason += has_any_gpu(devices) ? "found: " + describe_gpus(devices) : std::string("no GPU");
  reason += ") and " + cpu_name(cpu) +
            " has no native bfloat16 arithmetic (avx512_bf16 or AMX-BF16): 16-bit compute "
            "would not be faster here, so float32";
  return {Policy("float32"), reason};
}

PolicyChoice pick_policy_for_device() { return pick_policy_for_device(list_physical_devices()); }

std::string policy_compatibility_warning(const Policy& policy,
                                         const std::vector<PhysicalDevice>& devices) {
  if (policy.name() == "mixed_float16") return float16_warning(devices);
  if (policy.name() == "mixed_bfloat16") return bfloat16_warning(devices);
  return {};
}

void check_policy_compatibility(const Policy& policy) {
  if (!policy.is_mixed()) return;  // only the mixed policies are checked; skip listing devices
  try {
    const std::string warning = policy_compatibility_warning(policy, list_physical_devices());
    if (!warning.empty()) {
      warn_once("mixed_precision.compatibility." + policy.name(), policy.name() + ": " + warning);
    }
  } catch (const std::exception&) {
    // A compatibility check is advice: failing to give it must not fail set_global_policy().
  }
}

}  // namespace mixprec::mixed_precision
