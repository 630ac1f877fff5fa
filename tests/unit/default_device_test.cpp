// The default device: where TensorOptions-less creation puts tensors, scoped per thread.
#include <gtest/gtest.h>

#include <thread>

#include "mixprec/creation.h"
#include "mixprec/device.h"
#include "mixprec/error.h"

namespace mixprec {
namespace {

TEST(DefaultDevice, IsTheCpuAndScopesNestAndRestore) {
  EXPECT_EQ(default_device(), Device::cpu());
  {
    DeviceScope outer(Device::cuda(1));
    EXPECT_EQ(default_device(), Device::cuda(1));
    EXPECT_EQ(TensorOptions{}.device, Device::cuda(1));
    {
      DeviceScope inner(Device::cpu());
      EXPECT_EQ(default_device(), Device::cpu());
      EXPECT_TRUE(zeros(Shape{2}).device().is_cpu());
    }
    EXPECT_EQ(default_device(), Device::cuda(1));
  }
  EXPECT_EQ(default_device(), Device::cpu());
  EXPECT_EQ(TensorOptions{}.device, Device::cpu());
}

TEST(DefaultDevice, IsPerThread) {
  DeviceScope scope(Device::cuda(0));
  Device seen = Device::cuda(7);
  std::thread([&] { seen = default_device(); }).join();
  EXPECT_EQ(seen, Device::cpu());  // an input-pipeline thread keeps making CPU tensors
  EXPECT_EQ(default_device(), Device::cuda(0));
}

TEST(DefaultDevice, CreationFollowsTheScopeOrFailsClearly) {
  DeviceScope scope(Device::cuda(0));
  try {
    const Tensor t = zeros(Shape{4});
    EXPECT_EQ(t.device(), Device::cuda(0));  // a machine with a GPU and the CUDA backend
  } catch (const DeviceError& e) {
    // No GPU (or a CPU-only build): the error names the device.
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
