// list_physical_devices(): the CPU from /proc/cpuinfo and /proc/meminfo, the GPUs from the
// registered enumerator: initially the CUDA backend's (none in a CPU-only build).
#include "mixprec/physical_devices.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <exception>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "core/physical_devices_registry.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"

namespace mixprec {

namespace {

// The x86 flags that decide how fast 16-bit tensors compute: F16C converts float16<->float32,
// AVX2/AVX-512F are the float32 vector units the conversions feed, AVX512_BF16/AMX_BF16 compute in
// bfloat16 (dot products with float32 accumulation) and AVX512_FP16/AMX_FP16 in float16.
constexpr std::array<std::string_view, 7> kRelevantFlags = {
    "f16c", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16"};

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The value of the first "key : value" line whose key is `key`; empty when there is none.
std::string_view first_value(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

bool has_word(std::string_view words, std::string_view word) {
  std::size_t pos = 0;
  while (pos < words.size()) {
    while (pos < words.size() && std::isspace(static_cast<unsigned char>(words[pos]))) ++pos;
    std::size_t end = pos;
    while (end < words.size() && !std::isspace(static_cast<unsigned char>(words[end]))) ++end;
    if (end > pos && words.substr(pos, end - pos) == word) return true;
    pos = end;
  }
  return false;
}

// MemTotal from /proc/meminfo ("MemTotal:  24683656 kB"), in bytes; 0 when absent or malformed.
std::int64_t mem_total_bytes(std::string_view meminfo) {
  const std::string_view value = first_value(meminfo, "MemTotal");
  std::int64_t amount = 0;
  const auto [rest, ec] = std::from_chars(value.data(), value.data() + value.size(), amount);
  if (ec != std::errc() || amount <= 0) return 0;
  const std::string_view unit = trim(std::string_view(rest, value.data() + value.size() - rest));
  std::int64_t scale = 1;
  if (unit == "kB" || unit == "KB")
    scale = 1024;
  else if (unit == "mB" || unit == "MB")
    scale = 1024 * 1024;
  else if (!unit.empty())
    return 0;
  if (amount > std::numeric_limits<std::int64_t>::max() / scale) return 0;
  return amount * scale;
}

// The whole of a (/proc) file, or "" when it cannot be read. /proc files report size 0, so read
// until EOF; capped, since only the first processor's lines are needed.
std::string read_text_file(const char* path) {
  constexpr std::size_t kMaxBytes = 16u << 20;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::string text;
    std::array<char, 1 << 14> buffer;
    while (in && text.size() < kMaxBytes) {
      in.read(buffer.data(), buffer.size());
      text.append(buffer.data(), static_cast<std::size_t>(in.gcount()));
    }
    return text;
  } catch (const std::exception&) {
    return {};
  }
}

std::int64_t sysconf_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  if (pages > std::numeric_limits<std::int64_t>::max() / page_size) return 0;
  return static_cast<std::int64_t>(pages) * page_size;
}

// The CPU does not change while the process runs: read /proc once.
const PhysicalDevice& host_cpu() {
  static const PhysicalDevice cpu = [] {
    PhysicalDevice d =
        core::describe_cpu(read_text_file("/proc/cpuinfo"), read_text_file("/proc/meminfo"));
    if (d.memory_bytes == 0) d.memory_bytes = sysconf_memory_bytes();
    return d;
  }();
  return cpu;
}

}  // namespace

std::vector<PhysicalDevice> core::enumerate_cuda_gpus() {
  const Backend* backend = find_backend(DeviceType::cuda);
  return backend == nullptr ? std::vector<PhysicalDevice>{} : backend->runtime->enumerate();
}

namespace {

struct Registry {
  std::mutex mutex;
  core::GpuEnumerator enumerator = core::enumerate_cuda_gpus;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::vector<PhysicalDevice> list_gpus() {
  core::GpuEnumerator enumerator;
  {
    std::lock_guard lock(registry().mutex);
    enumerator = registry().enumerator;
  }
  if (!enumerator) return {};
  try {
    return enumerator();
  } catch (const std::exception& e) {
    warn_once("physical_devices.gpu_enumeration_failed",
              std::string("could not list the CUDA GPUs (") + e.what() +
                  "); continuing without GPUs. Check the NVIDIA driver with nvidia-smi.");
    return {};
  } catch (...) {
    warn_once("physical_devices.gpu_enumeration_failed",
              "could not list the CUDA GPUs (unknown error); continuing without GPUs");
    return {};
  }
}

}  // namespace

bool PhysicalDevice::has_feature(std::string_view feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

namespace core {

GpuEnumerator register_gpu_enumerator(GpuEnumerator enumerator) {
  std::lock_guard lock(registry().mutex);
  GpuEnumerator previous = std::move(registry().enumerator);
  registry().enumerator = std::move(enumerator);
  return previous;
}

PhysicalDevice describe_cpu(std::string_view cpuinfo, std::string_view meminfo) {
  PhysicalDevice d;
  d.device = Device::cpu();
  d.kind = "CPU";
  // x86 kernels say "model name"; ARM and others use one of the later keys.
  for (std::string_view key : {"model name", "Hardware", "Processor", "cpu model", "cpu"}) {
    const std::string_view name = first_value(cpuinfo, key);
    if (!name.empty()) {
      d.name = std::string(name);
      break;
    }
  }
  if (d.name.empty()) d.name = "unknown";
  std::string_view flags = first_value(cpuinfo, "flags");
  if (flags.empty()) flags = first_value(cpuinfo, "Features");
  for (std::string_view flag : kRelevantFlags) {
    if (has_word(flags, flag)) d.features.emplace_back(flag);
  }
  d.native_bfloat16 = d.has_feature("avx512_bf16") || d.has_feature("amx_bf16");
  d.native_float16 = d.has_feature("avx512_fp16") || d.has_feature("amx_fp16");
  d.memory_bytes = mem_total_bytes(meminfo);
  return d;
}

}  // namespace core

std::vector<PhysicalDevice> list_physical_devices() {
  std::vector<PhysicalDevice> devices{host_cpu()};
  for (PhysicalDevice& gpu : list_gpus()) devices.push_back(std::move(gpu));
  return devices;
}

std::vector<PhysicalDevice> list_physical_devices(std::string_view kind) {
  std::string upper(kind);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper != "CPU" && upper != "GPU") {
    throw ValueError("list_physical_devices: unknown device kind '" + std::string(kind) +
                     "'; expected \"CPU\" or \"GPU\"");
  }
  if (upper == "GPU") return list_gpus();
  return {host_cpu()};
}

}  // namespace mixprec
