// The CUDA backend where there is no usable GPU (this CPU machine and CI: CUDA 13 installed, no
// driver): device discovery reports zero GPUs without throwing, and every way of putting a tensor
// on a GPU is a DeviceError that names the device and says what to do. On a machine with a GPU
// these tests skip (tests/gpu covers it).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/allocator.h"
#include "backend/cuda/context.h"
#include "mixprec/cuda.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec {
namespace {

using testing::expect_error;

#define SKIP_IF_GPU()                                                               \
  if (cuda::device_count() > 0) {                                                   \
    GTEST_SKIP() << "a CUDA GPU is present; this test covers machines without one"; \
  }

TEST(CudaRuntimeTest, DeviceCountIsZeroWithoutAGpuAndNeverThrows) {
  int count = -1;
  EXPECT_NO_THROW(count = cuda::device_count());
  EXPECT_EQ(cuda::is_available(), count > 0);
  SKIP_IF_GPU();
  EXPECT_EQ(count, 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_TRUE(list_physical_devices("GPU").empty());
}

TEST(CudaRuntimeTest, CreatingACudaTensorIsAClearDeviceError) {
  SKIP_IF_GPU();
  expect_error<DeviceError>([] { empty({4}, {.device = Device::cuda()}); },
                            {"cuda:0", "no CUDA GPU is available", "--device cpu"});
  expect_error<DeviceError>(
      [] {
        zeros({2, 3}, {.dtype = kFloat16, .device = Device::cuda(1)});
      },
      {"cuda:1"});
  const Tensor t = from_vector(std::vector<float>{1, 2, 3}, {3});
  expect_error<DeviceError>([&] { t.to(Device::cuda()); }, {"cuda:0", "nvidia-smi"});
  // Nothing was allocated or counted on the GPU.
  EXPECT_EQ(memory_stats(Device::cuda()).current_bytes, 0);
  EXPECT_EQ(cuda::allocator_stats(Device::cuda()).device_mallocs, 0);
}

TEST(CudaRuntimeTest, MemoryStatsAndEmptyCacheWorkWithoutAGpu) {
  SKIP_IF_GPU();
  MemoryStats stats;
  EXPECT_NO_THROW(stats = memory_stats(Device::cuda()));
  EXPECT_EQ(stats.current_bytes, 0);
  EXPECT_EQ(stats.cached_bytes, 0);
  EXPECT_NO_THROW(empty_cache(Device::cuda()));
  EXPECT_NO_THROW(reset_peak_memory_stats(Device::cuda()));
}

TEST(CudaRuntimeTest, SynchronizeWithoutAGpuIsADeviceError) {
  SKIP_IF_GPU();
  expect_error<DeviceError>([] { cuda::synchronize(Device::cuda()); }, {"cuda:0"});
}

TEST(CudaRuntimeTest, TensorFloat32IsAProcessWideSwitch) {
  const bool initial = cuda::tensor_float_32_execution_enabled();
  cuda::enable_tensor_float_32_execution(true);
  EXPECT_TRUE(cuda::tensor_float_32_execution_enabled());
  cuda::enable_tensor_float_32_execution(false);
  EXPECT_FALSE(cuda::tensor_float_32_execution_enabled());
  cuda::enable_tensor_float_32_execution(initial);
}

TEST(CudaRuntimeTest, FormatsByteCountsForMessages) {
  EXPECT_EQ(cuda::format_bytes(100), "100 B");
  EXPECT_EQ(cuda::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(cuda::format_bytes(std::int64_t{3} << 30), "3.00 GiB");
}

}  // namespace
}  // namespace mixprec
