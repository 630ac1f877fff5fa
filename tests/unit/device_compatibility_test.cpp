// pick_policy_for_device() (DESIGN §2.2) on this machine (against /proc/cpuinfo read here) and on
// synthetic device lists, and the one-time compatibility warnings of DESIGN §2.6, captured through
// set_log_handler.
#include "mixprec/mixed_precision/device_compatibility.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/physical_devices_registry.h"
#include "mixprec/logging.h"

namespace mixprec::mixed_precision {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether /proc/cpuinfo's first flags line lists avx512_bf16 or amx_bf16 (read here, not through
// the library). Empty when there is no flags line.
std::optional<bool> cpuinfo_has_native_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    bool native = false;
    for (std::string w; words >> w;) native = native || w == "avx512_bf16" || w == "amx_bf16";
    return native;
  }
  return std::nullopt;
}

PhysicalDevice cpu(bool native_bf16, std::string name = "Test CPU 9000") {
  PhysicalDevice d;
  d.device = Device::cpu();
  d.kind = "CPU";
  d.name = std::move(name);
  d.native_bfloat16 = native_bf16;
  if (native_bf16) d.features = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"};
  return d;
}

PhysicalDevice gpu(int index, std::string name, int major, int minor) {
  PhysicalDevice d;
  d.device = Device::cuda(index);
  d.kind = "GPU";
  d.name = std::move(name);
  d.compute_capability_major = major;
  d.compute_capability_minor = minor;
  return d;
}

// Captures log messages and controls the GPU list for a test; restores both afterwards and resets
// the warn_once keys before and after, so each test sees the one-time warnings afresh.
class DeviceCompatibilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_warn_once_for_testing();
    saved_policy_ = global_policy();
    previous_handler_ = set_log_handler([this](LogLevel level, std::string_view message) {
      if (level == LogLevel::warning) warnings_.emplace_back(message);
    });
    previous_gpus_ = core::register_gpu_enumerator(nullptr);  // this build: no GPUs
  }
  void TearDown() override {
    core::register_gpu_enumerator(std::move(previous_gpus_));
    set_global_policy(saved_policy_);
    set_log_handler(std::move(previous_handler_));
    reset_warn_once_for_testing();
  }
  void use_gpus(std::vector<PhysicalDevice> gpus) {
    core::register_gpu_enumerator([gpus] { return gpus; });
  }

  std::vector<std::string> warnings_;

 private:
  Policy saved_policy_;
  LogHandler previous_handler_;
  core::GpuEnumerator previous_gpus_;
};

TEST_F(DeviceCompatibilityTest, PickOnThisMachineFollowsTheCpuFlags) {
  const std::optional<bool> native = cpuinfo_has_native_bf16();
  if (!native) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  const PolicyChoice choice = pick_policy_for_device();
  const std::string cpu_name = list_physical_devices("CPU").at(0).name;
  if (*native) {
    EXPECT_EQ(choice.policy.name(), "mixed_bfloat16");
    EXPECT_TRUE(contains(choice.reason, cpu_name)) << choice.reason;
    EXPECT_TRUE(contains(choice.reason, "bf16")) << choice.reason;
  } else {
    EXPECT_EQ(choice.policy.name(), "float32");
    EXPECT_TRUE(contains(choice.reason, "no GPU")) << choice.reason;
  }
}

TEST_F(DeviceCompatibilityTest, PickPrefersAVoltaOrNewerGpu) {
  const auto choice = pick_policy_for_device(
      {cpu(true), gpu(0, "Tesla P100", 6, 0), gpu(1, "NVIDIA H100 80GB HBM3", 9, 0)});
  EXPECT_EQ(choice.policy.name(), "mixed_float16");
  EXPECT_TRUE(contains(choice.reason, "cuda:1 NVIDIA H100 80GB HBM3")) << choice.reason;
  EXPECT_TRUE(contains(choice.reason, "9.0")) << choice.reason;

  const auto exactly_7 = pick_policy_for_device({cpu(false), gpu(0, "Tesla V100", 7, 0)});
  EXPECT_EQ(exactly_7.policy.name(), "mixed_float16");
}

TEST_F(DeviceCompatibilityTest, PickFallsBackToBFloat16CpuThenFloat32) {
  const auto bf16 = pick_policy_for_device({cpu(true), gpu(0, "Tesla P100", 6, 0)});
  EXPECT_EQ(bf16.policy.name(), "mixed_bfloat16");
  EXPECT_TRUE(contains(bf16.reason, "Test CPU 9000")) << bf16.reason;
  EXPECT_TRUE(contains(bf16.reason, "avx512_bf16")) << bf16.reason;

  const auto old_gpu = pick_policy_for_device({cpu(false), gpu(0, "Tesla P100", 6, 0)});
  EXPECT_EQ(old_gpu.policy.name(), "float32");
  EXPECT_TRUE(contains(old_gpu.reason, "Tesla P100 (compute capability 6.0)")) << old_gpu.reason;
  EXPECT_TRUE(contains(old_gpu.reason, "Test CPU 9000")) << old_gpu.reason;

  const auto cpu_only = pick_policy_for_device({cpu(false)});
  EXPECT_EQ(cpu_only.policy.name(), "float32");
  EXPECT_TRUE(contains(cpu_only.reason, "no GPU")) << cpu_only.reason;

  EXPECT_EQ(pick_policy_for_device({}).policy.name(), "float32");
}

TEST_F(DeviceCompatibilityTest, PickUsesRegisteredGpus) {
  use_gpus({gpu(0, "NVIDIA A100-SXM4-40GB", 8, 0)});
  EXPECT_EQ(pick_policy_for_device().policy.name(), "mixed_float16");
}

TEST_F(DeviceCompatibilityTest, Float16WarningTexts) {
  const std::string no_gpu = policy_compatibility_warning("mixed_float16", {cpu(true)});
  EXPECT_TRUE(contains(no_gpu, "no usable GPU")) << no_gpu;
  EXPECT_TRUE(contains(no_gpu, "compute capability 7.0")) << no_gpu;
  EXPECT_TRUE(contains(no_gpu, "slower")) << no_gpu;
  // The advice names the policy that is fast on this CPU.
  EXPECT_TRUE(contains(no_gpu, "use mixed_bfloat16 on this CPU")) << no_gpu;
  const std::string plain = policy_compatibility_warning("mixed_float16", {cpu(false)});
  EXPECT_TRUE(contains(plain, "use float32 on this CPU")) << plain;

  const std::string old_gpu =
      policy_compatibility_warning("mixed_float16", {cpu(false), gpu(0, "Tesla P100", 6, 0)});
  EXPECT_TRUE(contains(old_gpu, "slowly")) << old_gpu;
  EXPECT_TRUE(contains(old_gpu, "cuda:0 Tesla P100 (compute capability 6.0)")) << old_gpu;

  EXPECT_EQ(policy_compatibility_warning("mixed_float16", {cpu(false), gpu(0, "T4", 7, 5)}), "");
}

TEST_F(DeviceCompatibilityTest, BFloat16WarningTexts) {
  const std::string plain_cpu = policy_compatibility_warning("mixed_bfloat16", {cpu(false)});
  EXPECT_TRUE(contains(plain_cpu, "Test CPU 9000")) << plain_cpu;
  EXPECT_TRUE(contains(plain_cpu, "memory")) << plain_cpu;
  EXPECT_TRUE(contains(plain_cpu, "no compute speed-up")) << plain_cpu;

  EXPECT_EQ(policy_compatibility_warning("mixed_bfloat16", {cpu(true)}), "");
  // An Ampere GPU computes bfloat16 natively; a Turing one does not.
  EXPECT_EQ(policy_compatibility_warning("mixed_bfloat16", {cpu(false), gpu(0, "A10", 8, 6)}), "");
  const std::string turing =
      policy_compatibility_warning("mixed_bfloat16", {cpu(false), gpu(0, "T4", 7, 5)});
  EXPECT_TRUE(contains(turing, "T4 (compute capability 7.5)")) << turing;
}

TEST_F(DeviceCompatibilityTest, OtherPoliciesNeverWarn) {
  for (const char* name : {"float32", "float16", "bfloat16", "float64"}) {
    EXPECT_EQ(policy_compatibility_warning(name, {cpu(false)}), "") << name;
    set_global_policy(name);
  }
  EXPECT_TRUE(warnings_.empty());
}

// Every warning is one short line: the log prints "<policy>: <warning>", and `mixprec info` prints
// the same, so the text itself must not repeat the policy's name as a prefix.
TEST_F(DeviceCompatibilityTest, WarningsAreOneShortLineWithoutAPrefix) {
  const std::vector<std::vector<PhysicalDevice>> machines = {
      {cpu(true)},
      {cpu(false)},
      {cpu(false), gpu(0, "Tesla P100", 6, 0)},
      {cpu(false), gpu(0, "T4", 7, 5)}};
  for (const auto& devices : machines) {
    for (const char* name : {"mixed_float16", "mixed_bfloat16"}) {
      const std::string w = policy_compatibility_warning(name, devices);
      if (w.empty()) continue;
      EXPECT_EQ(w.find('\n'), std::string::npos) << w;
      // About 200 characters on a CPU; the GPUs found are named when there are some.
      EXPECT_LE(w.size(), devices.size() == 1 ? 200u : 260u) << w;
      EXPECT_FALSE(contains(w, "compatibility check")) << w;
      EXPECT_NE(w.rfind(name, 0), 0u) << "starts with the policy's name: " << w;
    }
  }
}

TEST_F(DeviceCompatibilityTest, TheLoggedLineStartsWithThePolicy) {
  set_global_policy("mixed_float16");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0].rfind("mixed_float16: ", 0), 0u) << warnings_[0];
  EXPECT_EQ(warnings_[0].find("mixed_float16", 1), std::string::npos)
      << "the policy named twice: " << warnings_[0];
}

TEST_F(DeviceCompatibilityTest, MixedFloat16WithoutGpuWarnsExactlyOnce) {
  set_global_policy("mixed_float16");
  set_global_policy("float32");
  set_global_policy("mixed_float16");
  check_policy_compatibility("mixed_float16");  // what a layer with dtype mixed_float16 does
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(contains(warnings_[0], "mixed_float16")) << warnings_[0];
  EXPECT_TRUE(contains(warnings_[0], "compute capability 7.0")) << warnings_[0];

  reset_warn_once_for_testing();  // a new "process": the warning comes back, once
  check_policy_compatibility("mixed_float16");
  check_policy_compatibility("mixed_float16");
  EXPECT_EQ(warnings_.size(), 2u);
}

TEST_F(DeviceCompatibilityTest, MixedFloat16WithAVoltaGpuDoesNotWarn) {
  use_gpus({gpu(0, "Tesla V100-SXM2-16GB", 7, 0)});
  set_global_policy("mixed_float16");
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(DeviceCompatibilityTest, MixedFloat16WithAnOldGpuNamesIt) {
  use_gpus({gpu(0, "Quadro P4000", 6, 1)});
  set_global_policy("mixed_float16");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(contains(warnings_[0], "Quadro P4000 (compute capability 6.1)")) << warnings_[0];
}

TEST_F(DeviceCompatibilityTest, MixedBFloat16WarnsOnceOnlyWithoutNativeBf16) {
  const std::optional<bool> native = cpuinfo_has_native_bf16();
  if (!native) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  for (int i = 0; i < 3; ++i) set_global_policy("mixed_bfloat16");
  EXPECT_EQ(warnings_.size(), *native ? 0u : 1u);
  if (!*native) EXPECT_TRUE(contains(warnings_[0], "no compute speed-up")) << warnings_[0];
}

TEST_F(DeviceCompatibilityTest, ConcurrentChecksWarnOnce) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 20; ++i) check_policy_compatibility("mixed_float16");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(warnings_.size(), 1u);
}

}  // namespace
}  // namespace mixprec::mixed_precision
