// Tensor::to(Device), Tensor::assign, to_vector/item and printing with CUDA tensors: every dtype
// survives the round trip bit-exactly, views and tensors larger than the staging buffers (8 MiB)
// included; the move is differentiable; assign converts and writes in place; a GPU to GPU copy
// (two GPUs only) is done before later work on either GPU.
#include <cstring>

#include "gpu/op_harness.h"
#include "support/expect_error.h"

namespace mixprec::testing {
namespace {

TEST(GpuTransferTest, EveryDtypeRoundTripsExactly) {
  MIXPREC_REQUIRE_GPU();
  const Tensor base = sample({7, 11}, -100, 100, kFloat64, 3);
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kBool}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor x = base.to(dtype);
    const Tensor g = x.to(kGpu);
    EXPECT_EQ(g.device(), kGpu);
    EXPECT_EQ(g.dtype(), dtype);
    EXPECT_EQ(g.shape(), x.shape());
    const Tensor back = g.to(Device::cpu());
    ASSERT_EQ(back.nbytes(), x.nbytes());
    EXPECT_EQ(std::memcmp(back.data_ptr(), x.data_ptr(), x.nbytes()), 0);
  }
}

TEST(GpuTransferTest, ViewsLargeAndEmptyTensors) {
  MIXPREC_REQUIRE_GPU();
  // 5M float32 = 20 MiB: three staging chunks each way.
  const Tensor big = sample({5 << 20}, -1, 1, kFloat32, 4);
  const Tensor back = big.to(kGpu).to(Device::cpu());
  EXPECT_EQ(std::memcmp(back.data_ptr(), big.data_ptr(), big.nbytes()), 0);
  // A transposed CPU view goes up contiguous; a GPU view comes down contiguous.
  const Tensor m = sample({30, 40}, -1, 1, kFloat16, 5);
  EXPECT_TRUE(all_close(m.transpose(0, 1).to(kGpu).to(Device::cpu()),
                        m.transpose(0, 1).contiguous(), {0, 0}));
  EXPECT_TRUE(all_close(m.to(kGpu).slice(1, 3, 40, 5).to(Device::cpu()),
                        m.slice(1, 3, 40, 5).contiguous(), {0, 0}));
  const Tensor none = zeros({0, 3});
  EXPECT_EQ(none.to(kGpu).to(Device::cpu()).shape(), Shape({0, 3}));
}

TEST(GpuTransferTest, ToDeviceIsDifferentiable) {
  MIXPREC_REQUIRE_GPU();
  Tensor w = sample({4, 5}, -1, 1, kFloat32, 6);
  w.set_requires_grad(true);
  const Tensor y = mul(w.to(kGpu), w.to(kGpu));  // on the GPU
  const Tensor g = sample({4, 5}, -1, 1, kFloat32, 7);
  const std::vector<Tensor> dw = grad(y, {w}, g.to(kGpu));
  EXPECT_EQ(dw[0].device(), Device::cpu());  // the gradient comes back to the variable's device
  EXPECT_TRUE(all_close(dw[0], mul(mul(w.detach(), g), 2.0), tolerance_for(kFloat32)));
}

TEST(GpuTransferTest, AssignWritesInPlaceWithConversion) {
  MIXPREC_REQUIRE_GPU();
  const Tensor variable = zeros({3, 4}).to(kGpu);
  const void* storage = variable.data_ptr();
  const Tensor update = sample({3, 4}, -2, 2, kFloat16, 8);
  variable.assign(update.to(kGpu));  // float16 source into a float32 variable
  EXPECT_EQ(variable.data_ptr(), storage);
  EXPECT_TRUE(all_close(variable.to(Device::cpu()), update.to(kFloat32), {0, 0}));
  // From a transposed GPU view, same dtype.
  const Tensor src = sample({4, 3}, -2, 2, kFloat32, 9);
  variable.assign(src.to(kGpu).transpose(0, 1));
  EXPECT_TRUE(all_close(variable.to(Device::cpu()), src.transpose(0, 1).contiguous(), {0, 0}));
  expect_error<DeviceError>([&] { variable.assign(src.transpose(0, 1)); }, {"cpu", "cuda:0"});
}

TEST(GpuTransferTest, ToVectorItemAndPrinting) {
  MIXPREC_REQUIRE_GPU();
  const Tensor g = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f}, {3}).to(kGpu);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(g.slice(0, 2, 3).item(), 3.25);
  EXPECT_EQ(g.to_string(),
            "Tensor(shape=(3,), dtype=float32, device=cuda:0, values=[1.5, -2, 3.25])");
}

TEST(GpuTransferTest, CreationOnTheGpu) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kInt64, kBool}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    EXPECT_TRUE(matches(zeros({5, 3}, {.dtype = dtype, .device = kGpu}),
                        zeros({5, 3}, {.dtype = dtype}), {0, 0}));
    EXPECT_TRUE(matches(ones({5, 3}, {.dtype = dtype, .device = kGpu}),
                        ones({5, 3}, {.dtype = dtype}), {0, 0}));
    EXPECT_TRUE(matches(full({7}, 2.5, {.dtype = dtype, .device = kGpu}),
                        full({7}, 2.5, {.dtype = dtype}), {0, 0}));
  }
  const std::vector<float> v = {1, 2, 3, 4};
  EXPECT_TRUE(matches(from_vector(v, {2, 2}, {.device = kGpu}), from_vector(v, {2, 2}), {0, 0}));
}

TEST(GpuTransferTest, GpuToGpuCopyIsCompleteBeforeLaterWork) {
  MIXPREC_REQUIRE_GPU();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA GPUs";
  const Device second = Device::cuda(1);
  // 64 MiB: a copy long enough that work queued right after it would overtake an unordered one.
  const Tensor host = sample({16 << 20}, -1, 1, kFloat32, 6);
  for (int round = 0; round < 3; ++round) {
    Tensor src = host.to(kGpu);
    const Tensor dst = src.to(second);
    // The source block goes back to cuda:0's pool at once and is overwritten by the next user.
    src = Tensor();
    const Tensor scribble = full({16 << 20}, 7.0, {.device = kGpu});
    // Queued on cuda:1 right after the copy: reads the copied values only if it waited for them.
    const Tensor doubled = mul(dst, 2.0);
    EXPECT_TRUE(all_close(doubled.to(Device::cpu()), mul(host, 2.0), {0, 0})) << "round " << round;
    EXPECT_TRUE(scribble.defined());
  }
}

}  // namespace
}  // namespace mixprec::testing
