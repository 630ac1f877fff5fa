// The CUDA copy's 2-D transpose path (kernels/transpose_kernels.cuh, chosen in copy.cu) on the
// device: what the host emulation (tests/unit/cuda_transpose_emulation_test.cpp) cannot check is
// the launcher's choice of variant from the real pointers' alignment and the compiled kernel's
// vector accesses. Copies of permuted views that merge into 2-D transposes (the convolution's
// HWIO <-> KRSC filters, plain transposes, a source at an unaligned offset) against the CPU
// backend's copy, byte for byte, in every element size.
#include <cstring>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

::testing::AssertionResult same_bytes(const Tensor& gpu, const Tensor& cpu) {
  const Tensor back = on_cpu(gpu);
  if (back.shape() != cpu.shape() || back.dtype() != cpu.dtype()) {
    return ::testing::AssertionFailure() << "shape or dtype differs";
  }
  const Tensor want = cpu.contiguous();
  if (std::memcmp(back.data_ptr(), want.data_ptr(), want.nbytes()) != 0) {
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

struct Case {
  const char* name;
  Shape shape;
  std::vector<int> axes;
};

TEST(GpuTransposeCopyTest, PermutedCopiesMatchTheCpuByteForByte) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {"HWIO -> KRSC", {3, 3, 64, 128}, {3, 0, 1, 2}},
      {"KRSC -> HWIO", {128, 3, 3, 64}, {1, 2, 3, 0}},
      {"stem filters (147 rows)", {7, 7, 3, 64}, {3, 0, 1, 2}},
      {"ragged both ways", {1, 1, 37, 45}, {3, 0, 1, 2}},
      {"two rows", {2, 1000}, {1, 0}},
      {"large float16 filter", {3, 3, 512, 512}, {3, 0, 1, 2}},
  };
  for (const DType dtype : {kUInt8, kFloat16, kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)));
      const Tensor x = sample(c.shape, 0.0, 200.0, dtype, 7);
      EXPECT_TRUE(same_bytes(on_gpu(x).permute(c.axes).contiguous(), x.permute(c.axes)));
    }
  }
}

TEST(GpuTransposeCopyTest, UnalignedSourceTakesTheElementPath) {
  MIXPREC_REQUIRE_GPU();
  for (const DType dtype : {kUInt8, kFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    // A 64 x 96 matrix starting one element into its storage: no vectors on the source.
    const Tensor flat = sample({1 + 64 * 96}, 0.0, 200.0, dtype, 11);
    const Tensor gpu = on_gpu(flat).slice(0, 1, 1 + 64 * 96).reshape({64, 96});
    const Tensor cpu = flat.slice(0, 1, 1 + 64 * 96).reshape({64, 96});
    EXPECT_TRUE(same_bytes(gpu.transpose(0, 1).contiguous(), cpu.transpose(0, 1)));
  }
}

}  // namespace
}  // namespace mixprec::testing
