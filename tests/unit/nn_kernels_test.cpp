// The NnKernels tables (backend/nn_kernels.h): which entries each backend sets (the documented
// capabilities are the only null ones), and that the CPU instance's own choices (the 16-bit
// accumulation loop behind matmul, the convolution path, the saved state of convolution and
// pooling) are the ones the ops relied on before the table existed.
#include "backend/nn_kernels.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/conv_reference.h"
#include "backend/cpu/matmul_accumulation.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::normal;

std::vector<double> values(const Tensor& t) {
  return cast(t, DType::float64).contiguous().to_vector<double>();
}

// Every entry but the capabilities (matmul_epilogue, autocast_*) is set.
void expect_required_entries(const NnKernels& nn) {
  EXPECT_NE(nn.matmul, nullptr);
  EXPECT_NE(nn.matmul_summed, nullptr);
  EXPECT_NE(nn.conv2d_forward, nullptr);
  EXPECT_NE(nn.conv2d_backward_data, nullptr);
  EXPECT_NE(nn.conv2d_backward_filters, nullptr);
  EXPECT_NE(nn.pool2d_forward, nullptr);
  EXPECT_NE(nn.pool2d_backward, nullptr);
  EXPECT_NE(nn.batch_norm_training, nullptr);
  EXPECT_NE(nn.batch_norm_inference, nullptr);
  EXPECT_NE(nn.batch_norm_backward, nullptr);
  EXPECT_NE(nn.zero_pad2d, nullptr);
  EXPECT_NE(nn.resize_bilinear, nullptr);
  EXPECT_NE(nn.resize_bilinear_backward, nullptr);
}

TEST(NnKernelsTable, CpuHasEveryEntryButTheFusedEpilogue) {
  const Backend* cpu = find_backend(DeviceType::cpu);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(cpu->nn, nullptr);
  expect_required_entries(*cpu->nn);
  EXPECT_EQ(cpu->nn->matmul_epilogue, nullptr);  // Dense composes its ops on the CPU
  EXPECT_NE(cpu->nn->autocast_matmul, nullptr);
  EXPECT_NE(cpu->nn->autocast_matmul_backward_data, nullptr);
  EXPECT_NE(cpu->nn->autocast_matmul_backward_kernel, nullptr);
}

TEST(NnKernelsTable, CudaHasTheFusedEpilogueAndNoAutocastProduct) {
  const Backend* cuda = find_backend(DeviceType::cuda);
  if (cuda == nullptr) GTEST_SKIP() << "this build has no CUDA backend";
  ASSERT_NE(cuda->nn, nullptr);
  expect_required_entries(*cuda->nn);
  EXPECT_NE(cuda->nn->matmul_epilogue, nullptr);
  EXPECT_EQ(cuda->nn->autocast_matmul, nullptr);
  EXPECT_EQ(cuda->nn->autocast_matmul_backward_data, nullptr);
  EXPECT_EQ(cuda->nn->autocast_matmul_backward_kernel, nullptr);
}

const NnKernels& cpu_nn() { return *backend_for(Device::cpu()).nn; }

TEST(NnKernelsCpu, MatmulWithComputeDtypeRoundsEveryPartialSum) {
  // 4096 ones summed in float16 stop at 2048 (1 is half an ulp there); float32 accumulation
  // reaches 4096.
  const Tensor a = ones(Shape{1, 4096}, {.dtype = DType::float16});
  const Tensor b = ones(Shape{4096, 1}, {.dtype = DType::float16});
  const NnKernels& nn = cpu_nn();
  EXPECT_EQ(values(nn.matmul(a, b, Transpose::no, Transpose::no, DType::float16,
                             Accumulation::compute_dtype)),
            std::vector<double>{2048.0});
  EXPECT_EQ(
      values(nn.matmul(a, b, Transpose::no, Transpose::no, DType::float16, Accumulation::float32)),
      std::vector<double>{4096.0});
}

TEST(NnKernelsCpu, MatmulSummedWritesTheTransposeAndSumsBroadcastBatches) {
  const Tensor l = normal(Shape{3, 4, 5}, 1, DType::bfloat16);
  const Tensor r = normal(Shape{5, 2}, 2, DType::bfloat16);
  const NnKernels& nn = cpu_nn();
  const Tensor plain =
      nn.matmul_summed(l, Transpose::no, r, Transpose::no, Shape{3, 4, 2}, Transpose::no);
  const Tensor transposed =
      nn.matmul_summed(l, Transpose::no, r, Transpose::no, Shape{3, 2, 4}, Transpose::yes);
  EXPECT_EQ(values(transposed), values(plain.transpose(1, 2)));
  // Summed over the batch into one (4, 2) matrix: the same running sum as the loop's.
  const Tensor summed =
      nn.matmul_summed(l, Transpose::no, r, Transpose::no, Shape{4, 2}, Transpose::no);
  EXPECT_EQ(values(summed), values(cpu::matmul_accumulate16(l, Transpose::no, r, Transpose::no,
                                                            Shape{4, 2}, Transpose::no)));
  EXPECT_EQ(summed.shape(), (Shape{4, 2}));
}

ConvGeometry small_geometry() {
  ConvGeometry g;
  g.batch = 2, g.in_h = 5, g.in_w = 4, g.in_channels = 3;
  g.kernel_h = 3, g.kernel_w = 2, g.out_channels = 4;
  g.out_h = 3, g.out_w = 3;
  return g;
}

TEST(NnKernelsCpu, ConvChoosesOneDnnOrTheLoopsByDtypeAndAccumulation) {
  const ConvGeometry g = small_geometry();
  const NnKernels& nn = cpu_nn();
  const Tensor x16 = normal(Shape{2, 5, 4, 3}, 3, DType::float16);
  const Tensor w16 = normal(Shape{3, 2, 3, 4}, 4, DType::float16);
  // 16-bit accumulation: the loops that round every partial sum.
  const ConvForward storage = nn.conv2d_forward(x16, w16, Tensor(), g, ConvKind::general,
                                                Accumulation::compute_dtype, SaveForBackward::no);
  EXPECT_EQ(values(storage.y), values(cpu::conv2d_reference_forward(x16, w16, Tensor(), g,
                                                                    Accumulation::compute_dtype)));
  // float32 data: oneDNN, whatever the accumulation setting.
  const Tensor x = normal(Shape{2, 5, 4, 3}, 5), w = normal(Shape{3, 2, 3, 4}, 6);
  const ConvForward dnnl = nn.conv2d_forward(x, w, Tensor(), g, ConvKind::general,
                                             Accumulation::compute_dtype, SaveForBackward::no);
  EXPECT_EQ(values(dnnl.y), values(cpu::conv2d_forward(x, w, Tensor(), g)));
}

TEST(NnKernelsCpu, ConvSavesTheInputAndFiltersOnlyWhenAsked) {
  const ConvGeometry g = small_geometry();
  const NnKernels& nn = cpu_nn();
  const Tensor x = normal(Shape{2, 5, 4, 3}, 7), w = normal(Shape{3, 2, 3, 4}, 8);
  const ConvForward none = nn.conv2d_forward(x, w, Tensor(), g, ConvKind::general,
                                             Accumulation::float32, SaveForBackward::no);
  EXPECT_FALSE(none.saved.input.defined());
  EXPECT_FALSE(none.saved.filters.defined());
  const ConvForward kept = nn.conv2d_forward(x, w, Tensor(), g, ConvKind::general,
                                             Accumulation::float32, SaveForBackward::yes);
  EXPECT_EQ(kept.saved.form, ConvSavedForm::as_given);
  ASSERT_TRUE(kept.saved.input.defined());
  ASSERT_TRUE(kept.saved.filters.defined());
  const Tensor dy = normal(Shape{2, 3, 3, 4}, 9);
  EXPECT_EQ(
      values(nn.conv2d_backward_data(dy, kept.saved, g, ConvKind::general, Accumulation::float32)),
      values(cpu::conv2d_backward_data(dy, w, g)));
  EXPECT_EQ(values(nn.conv2d_backward_filters(dy, kept.saved, g, ConvKind::general,
                                              Accumulation::float32)),
            values(cpu::conv2d_backward_filters(x, dy, g)));
}

TEST(NnKernelsCpu, MaxPoolingKeepsItsArgmaxOnlyWhenAsked) {
  PoolGeometry g;
  g.batch = 1, g.in_h = 4, g.in_w = 4, g.channels = 2;
  g.window_h = g.window_w = 2, g.stride_h = g.stride_w = 2, g.out_h = g.out_w = 2;
  const Tensor x = normal(Shape{1, 4, 4, 2}, 10);
  const NnKernels& nn = cpu_nn();
  EXPECT_FALSE(nn.pool2d_forward(PoolKind::max, x, g, SaveForBackward::no).saved.argmax.defined());
  const PoolForward kept = nn.pool2d_forward(PoolKind::max, x, g, SaveForBackward::yes);
  EXPECT_TRUE(kept.saved.argmax.defined());
  // Average pooling needs nothing.
  EXPECT_FALSE(
      nn.pool2d_forward(PoolKind::average, x, g, SaveForBackward::yes).saved.argmax.defined());
}

TEST(NnKernelsCpu, ZeroPadKeepsTheInteriorAndZerosTheBorder) {
  const Tensor x = normal(Shape{1, 2, 2, 1}, 11);
  const Tensor y = cpu_nn().zero_pad2d(x, Padding2d{1, 0, 0, 2});
  ASSERT_EQ(y.shape(), (Shape{1, 3, 4, 1}));
  const std::vector<double> v = values(y), xv = values(x);
  EXPECT_EQ(v, (std::vector<double>{0, 0, 0, 0, xv[0], xv[1], 0, 0, xv[2], xv[3], 0, 0}));
}

}  // namespace
}  // namespace mixprec
