// mixprec::cuda::host_synchronizations() where no GPU is waited for: in a build without the CUDA
// backend and on a machine without a GPU it is 0 and never throws, whatever the program does on
// the CPU or tries on a GPU; the CPU backend's runtime entry is 0 too. (tests/gpu/syncs_test.cpp
// counts real waits on a GPU.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

TEST(HostSynchronizations, TheCpuBackendCountsNone) {
  const Backend* cpu = find_backend(DeviceType::cpu);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(cpu->runtime->host_synchronizations, nullptr);
  EXPECT_EQ(cpu->runtime->host_synchronizations(), 0);
  // With the CUDA backend built, its entry is what the public function reports.
  if (const Backend* gpu = find_backend(DeviceType::cuda)) {
    EXPECT_EQ(gpu->runtime->host_synchronizations(), cuda::host_synchronizations());
  }
}

TEST(HostSynchronizations, ZeroAndNeverThrowsWithoutAGpu) {
  std::int64_t before = -1;
  EXPECT_NO_THROW(before = cuda::host_synchronizations());
  EXPECT_GE(before, 0);
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA GPU is present (tests/gpu covers it)";
  EXPECT_EQ(before, 0);
  // CPU work, CPU moves and failed attempts to reach a GPU wait for nothing.
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor y = matmul(x, x).to(Device::cpu());
  EXPECT_EQ(y.to_vector<float>()[0], 7.0f);
  EXPECT_THROW(cuda::synchronize(Device::cuda(0)), DeviceError);
  EXPECT_THROW((void)x.to(Device::cuda(0)), DeviceError);
  EXPECT_THROW(zeros({2}, {.device = Device::cuda(0)}), DeviceError);
  EXPECT_NO_THROW(empty_cache(Device::cuda(0)));
  std::int64_t after = -1;
  EXPECT_NO_THROW(after = cuda::host_synchronizations());
  EXPECT_EQ(after, 0);
}

}  // namespace
}  // namespace mixprec
