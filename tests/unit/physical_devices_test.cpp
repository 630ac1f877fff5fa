// list_physical_devices(): the CPU entry against /proc read independently here, the GPU
// enumerator hook (none, fake GPUs, a throwing one), the kind filter, and describe_cpu() on
// synthetic and malformed /proc text.
#include "mixprec/physical_devices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/physical_devices_registry.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"

namespace mixprec {
namespace {

// The first "key : value" line of a /proc file, read here without the library's parser.
bool proc_value(const char* path, const std::string& key, std::string* value) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
    *value = v;
    return true;
  }
  return false;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Replaces the GPU enumerator for the test's duration.
class ScopedGpus {
 public:
  explicit ScopedGpus(core::GpuEnumerator e) : previous_(core::register_gpu_enumerator(e)) {}
  ~ScopedGpus() { core::register_gpu_enumerator(std::move(previous_)); }

 private:
  core::GpuEnumerator previous_;
};

PhysicalDevice fake_gpu(int index, std::string name, int major, int minor) {
  PhysicalDevice d;
  d.device = Device::cuda(index);
  d.name = std::move(name);
  d.kind = "GPU";
  d.compute_capability_major = major;
  d.compute_capability_minor = minor;
  d.memory_bytes = std::int64_t{80} << 30;
  d.native_float16 = major >= 7;
  d.native_bfloat16 = major >= 8;
  return d;
}

TEST(PhysicalDevicesTest, TheCpuComesFirstAndMatchesProcCpuinfo) {
  const std::vector<PhysicalDevice> devices = list_physical_devices();
  ASSERT_FALSE(devices.empty());
  const PhysicalDevice& cpu = devices.front();
  EXPECT_EQ(cpu.kind, "CPU");
  EXPECT_TRUE(cpu.device.is_cpu());
  EXPECT_EQ(cpu.compute_capability_major, 0);
  EXPECT_EQ(cpu.compute_capability_minor, 0);

  std::string model, flag_line;
  if (!proc_value("/proc/cpuinfo", "flags", &flag_line)) {
    GTEST_SKIP() << "/proc/cpuinfo has no x86 flags line on this machine";
  }
  if (proc_value("/proc/cpuinfo", "model name", &model)) EXPECT_EQ(cpu.name, model);
  const std::vector<std::string> flags = words(flag_line);
  const auto has = [&](const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  };
  std::vector<std::string> expected;
  for (const char* f :
       {"f16c", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16"}) {
    if (has(f)) expected.emplace_back(f);
  }
  EXPECT_EQ(cpu.features, expected);
  EXPECT_EQ(cpu.native_bfloat16, has("avx512_bf16") || has("amx_bf16"));
  EXPECT_EQ(cpu.native_float16, has("avx512_fp16") || has("amx_fp16"));
  for (const std::string& f : expected) EXPECT_TRUE(cpu.has_feature(f)) << f;
  EXPECT_FALSE(cpu.has_feature("avx"));  // only the relevant flags are kept
}

TEST(PhysicalDevicesTest, HostMemoryMatchesProcMeminfo) {
  const PhysicalDevice cpu = list_physical_devices("CPU").at(0);
  std::string mem_total;
  if (!proc_value("/proc/meminfo", "MemTotal", &mem_total)) {
    EXPECT_GE(cpu.memory_bytes, 0);
    GTEST_SKIP() << "no /proc/meminfo";
  }
  const std::vector<std::string> parts = words(mem_total);  // "24683656 kB"
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(parts[1], "kB");
  EXPECT_EQ(cpu.memory_bytes, std::stoll(parts[0]) * 1024);
}

TEST(PhysicalDevicesTest, NoRegisteredEnumeratorMeansNoGpus) {
  ScopedGpus none(nullptr);
  EXPECT_TRUE(list_physical_devices("GPU").empty());
  const auto all = list_physical_devices();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, "CPU");
}

TEST(PhysicalDevicesTest, RegisteredGpusFollowTheCpuInOrder) {
  ScopedGpus two([] {
    return std::vector<PhysicalDevice>{fake_gpu(0, "NVIDIA A100-SXM4-40GB", 8, 0),
                                       fake_gpu(1, "Tesla P100-PCIE-16GB", 6, 0)};
  });
  const auto all = list_physical_devices();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].kind, "CPU");
  EXPECT_EQ(all[1].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(all[1].device, Device::cuda(0));
  EXPECT_EQ(all[2].compute_capability_major, 6);
  const auto gpus = list_physical_devices("gpu");  // kind is case-insensitive
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].device, Device::cuda(1));
  const auto cpus = list_physical_devices("CPU");
  ASSERT_EQ(cpus.size(), 1u);
  EXPECT_EQ(cpus[0].kind, "CPU");
}

TEST(PhysicalDevicesTest, AThrowingEnumeratorMeansNoGpusAndOneWarning) {
  reset_warn_once_for_testing();
  std::vector<std::string> warnings;
  LogHandler previous =
      set_log_handler([&](LogLevel, std::string_view m) { warnings.emplace_back(m); });
  {
    ScopedGpus broken([]() -> std::vector<PhysicalDevice> {
      throw DeviceError("CUDA driver version is insufficient for CUDA runtime version");
    });
    EXPECT_TRUE(list_physical_devices("GPU").empty());
    EXPECT_EQ(list_physical_devices().size(), 1u);
  }
  set_log_handler(std::move(previous));
  reset_warn_once_for_testing();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("driver version is insufficient"), std::string::npos) << warnings[0];
}

TEST(PhysicalDevicesTest, UnknownKindThrows) {
  try {
    list_physical_devices("TPU");
    FAIL() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'TPU'"), std::string::npos) << e.what();
  }
}

// ---- describe_cpu on synthetic text ----

constexpr const char* kSapphireRapids =
    "processor\t: 0\n"
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu sse avx f16c avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile "
    "avx512_fp16\n"
    "\n"
    "processor\t: 1\n"
    "model name\t: second processor\n"
    "flags\t\t: fpu amx_fp16\n";

TEST(DescribeCpuTest, ReadsTheFirstProcessorsNameAndRelevantFlags) {
  const PhysicalDevice cpu =
      core::describe_cpu(kSapphireRapids, "MemTotal:       2048 kB\nMemFree: 1 kB\n");
  EXPECT_EQ(cpu.name, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(cpu.kind, "CPU");
  EXPECT_EQ(cpu.features, (std::vector<std::string>{"f16c", "avx2", "avx512f", "avx512_bf16",
                                                    "avx512_fp16", "amx_bf16"}));
  EXPECT_TRUE(cpu.native_bfloat16);
  EXPECT_TRUE(cpu.native_float16);
  EXPECT_EQ(cpu.memory_bytes, 2048 * 1024);
}

TEST(DescribeCpuTest, Avx2OnlyCpuHasNoNative16BitArithmetic) {
  const PhysicalDevice cpu = core::describe_cpu(
      "model name : AMD EPYC 7B12\nflags : fpu avx f16c avx2 avx512_bf16x xavx512f\n", "");
  EXPECT_EQ(cpu.name, "AMD EPYC 7B12");
  // Whole words only: "avx512_bf16x" and "xavx512f" are not avx512_bf16 / avx512f.
  EXPECT_EQ(cpu.features, (std::vector<std::string>{"f16c", "avx2"}));
  EXPECT_FALSE(cpu.native_bfloat16);
  EXPECT_FALSE(cpu.native_float16);
  EXPECT_EQ(cpu.memory_bytes, 0);
}

TEST(DescribeCpuTest, AmxAloneCountsAsNative) {
  const PhysicalDevice cpu = core::describe_cpu("flags : amx_bf16 amx_fp16\n", "");
  EXPECT_TRUE(cpu.native_bfloat16);
  EXPECT_TRUE(cpu.native_float16);
  EXPECT_EQ(cpu.name, "unknown");
}

TEST(DescribeCpuTest, ArmStyleKeys) {
  const PhysicalDevice cpu = core::describe_cpu(
      "processor : 0\nFeatures : fp asimd fphp bf16\n\nHardware : Some SoC\n", "");
  EXPECT_EQ(cpu.name, "Some SoC");
  EXPECT_TRUE(cpu.features.empty());  // the feature list is x86's
}

TEST(DescribeCpuTest, EmptyOrMalformedTextNeverThrows) {
  for (const auto& [cpuinfo, meminfo] : std::vector<std::pair<std::string, std::string>>{
           {"", ""},
           {"garbage without colons\n\n\n", "MemTotal: abc kB\n"},
           {"model name :\nflags :\n", "MemTotal: -5 kB\n"},
           {":::\n", "MemTotal: 99999999999999999999999 kB\n"},
           {"model name", "MemTotal: 12 parsecs\n"},
           {std::string("model name : a\0b", 16), "MemTotal:"},
       }) {
    SCOPED_TRACE(cpuinfo + " / " + meminfo);
    PhysicalDevice cpu;
    ASSERT_NO_THROW(cpu = core::describe_cpu(cpuinfo, meminfo));
    EXPECT_FALSE(cpu.name.empty());
    EXPECT_EQ(cpu.memory_bytes, 0);
    EXPECT_TRUE(cpu.features.empty());
  }
  EXPECT_EQ(core::describe_cpu("", "").name, "unknown");
}

}  // namespace
}  // namespace mixprec
