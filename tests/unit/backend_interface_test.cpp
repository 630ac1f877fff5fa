// The device backend interface (src/backend/backend.h): one table per device kind, complete, and
// the one DeviceError for a kind this build lacks; the op vocabulary generated from its X-macros.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "backend/tensor_kernels.h"
#include "core/op_kinds.h"
#include "mixprec/creation.h"
#include "mixprec/cuda.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec {
namespace {

// Every entry of a table of function pointers, viewed as words: none may be null.
template <typename Table>
void expect_no_null_entry(const Table& table, const char* what) {
  static_assert(sizeof(Table) % sizeof(void (*)()) == 0);
  constexpr std::size_t kEntries = sizeof(Table) / sizeof(void (*)());
  for (std::size_t i = 0; i < kEntries; ++i) {
    void (*entry)() = nullptr;
    std::memcpy(&entry, reinterpret_cast<const char*>(&table) + i * sizeof(entry), sizeof(entry));
    EXPECT_NE(entry, nullptr) << what << " entry " << i << " is null";
  }
}

TEST(BackendInterface, CpuBackendIsCompleteAndNamed) {
  const Backend* cpu = find_backend(DeviceType::cpu);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->type, DeviceType::cpu);
  EXPECT_STREQ(cpu->name, "cpu");
  ASSERT_NE(cpu->runtime, nullptr);
  ASSERT_NE(cpu->tensor, nullptr);
  EXPECT_NE(cpu->nn, nullptr);
  EXPECT_NE(cpu->training, nullptr);
  EXPECT_NE(cpu->services, nullptr);
  expect_no_null_entry(*cpu->runtime, "cpu DeviceRuntime");
  expect_no_null_entry(*cpu->tensor, "cpu TensorKernels");
  EXPECT_EQ(&backend_for(Device::cpu()), cpu);
  EXPECT_EQ(cpu->runtime->device_count(), 1);
}

TEST(BackendInterface, CudaBackendPresentExactlyWhenBuilt) {
  const Backend* cuda = find_backend(DeviceType::cuda);
  if (MIXPREC_HAVE_CUDA) {
    ASSERT_NE(cuda, nullptr);
    EXPECT_EQ(cuda->type, DeviceType::cuda);
    EXPECT_STREQ(cuda->name, "cuda");
    expect_no_null_entry(*cuda->runtime, "cuda DeviceRuntime");
    expect_no_null_entry(*cuda->tensor, "cuda TensorKernels");
    EXPECT_EQ(&backend_for(Device::cuda(0)), cuda);
    EXPECT_EQ(cuda->runtime->device_count(), mixprec::cuda::device_count());
  } else {
    EXPECT_EQ(cuda, nullptr);
    EXPECT_EQ(mixprec::cuda::device_count(), 0);
    EXPECT_FALSE(mixprec::cuda::is_available());
  }
}

// Without the backend, every way of reaching a CUDA device ends in the one DeviceError of
// backend_for(), which names the device and says what to do.
TEST(BackendInterface, MissingBackendIsOneClearDeviceError) {
  if (MIXPREC_HAVE_CUDA) GTEST_SKIP() << "this build has the CUDA backend";
  try {
    (void)backend_for(Device::cuda(0));
    FAIL() << "no DeviceError";
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find("no CUDA backend"), std::string::npos) << message;
    EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
  }
  EXPECT_THROW(zeros({2}, {.device = Device::cuda(0)}), DeviceError);
  EXPECT_THROW(ones({2}).to(Device::cuda(0)), DeviceError);
  EXPECT_THROW(mixprec::cuda::synchronize(Device::cuda(0)), DeviceError);
}

TEST(OpVocabulary, NamesComeFromTheLists) {
  EXPECT_STREQ(op_name(BinaryOp::add), "add");
  EXPECT_STREQ(op_name(BinaryOp::minimum), "minimum");
  EXPECT_STREQ(op_name(UnaryOp::gelu_tanh), "gelu(tanh)");
  EXPECT_STREQ(op_name(UnaryOp::silu), "silu");
  EXPECT_STREQ(op_name(CompareOp::greater_equal), "greater_equal");
  EXPECT_STREQ(op_name(ReduceOp::max), "max");
  EXPECT_STREQ(op_name(SoftmaxKind::log_softmax), "log_softmax");
  EXPECT_STREQ(op_name(PoolKind::average), "average");
}

// TensorKernels::copy writes through a strided destination (a window of a larger tensor).
TEST(CpuTensorKernels, CopyIntoAStridedWindow) {
  const Tensor big = zeros({3, 4});
  const Tensor window = big.slice(1, 1, 4, 2);  // columns 1 and 3
  const Tensor values = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  backend_for(Device::cpu()).tensor->copy(values, window);
  EXPECT_EQ(big.to_vector<float>(), (std::vector<float>{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6}));
  // And from a strided source into a contiguous destination.
  const Tensor out = zeros({2, 3});
  backend_for(Device::cpu()).tensor->copy(values.transpose(0, 1), out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST(CpuTensorKernels, FillWritesEveryElementInTheDtype) {
  const Tensor t = empty({5}, {.dtype = DType::bfloat16});
  backend_for(Device::cpu()).tensor->fill(t, 1.5);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>(5, 1.5f)));
  backend_for(Device::cpu()).tensor->fill(t, -0.0);
  for (float v : t.to_vector<float>()) EXPECT_TRUE(v == 0.0f && std::signbit(v));
}

}  // namespace
}  // namespace mixprec
