// Host-side geometry decisions of the CUDA backend, checked without a GPU: the elementwise plan
// (broadcast strides, merged axes, the dense and 32-bit-index tests) and how matmul operands reach
// cuBLASLt (row-major, transposed view, or copied; one batch stride or copied out). Expected
// values are worked out by hand from the shapes and strides.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/matmul.h"
#include "backend/cuda/plan.h"
#include "mixprec/mixprec.h"

namespace mixprec::cuda {
namespace {

using Strides = std::vector<std::int64_t>;

TEST(CudaLayoutTest, AContiguousTensorIsOneDenseAxis) {
  const auto plan = make_strided<1>(Shape{4, 5, 6}, {Strides{30, 6, 1}});
  EXPECT_EQ(plan.ndim, 1);
  EXPECT_EQ(plan.sizes[0], 120);
  EXPECT_EQ(plan.strides[0][0], 1);
  EXPECT_TRUE(plan.dense);
  EXPECT_TRUE(plan.index32);
  EXPECT_EQ(plan.numel, 120);
}

TEST(CudaLayoutTest, BroadcastingKeepsTheAxesThatDiffer) {
  // (16, 40) + (40,): the bias has stride 0 along the rows.
  const Tensor a = zeros({16, 40}), b = zeros({40});
  const auto plan = make_plan<2>(Shape{16, 40}, {&a, &b});
  ASSERT_EQ(plan.ndim, 2);
  EXPECT_EQ(plan.sizes[0], 16);
  EXPECT_EQ(plan.sizes[1], 40);
  EXPECT_EQ(plan.strides[0][0], 40);
  EXPECT_EQ(plan.strides[0][1], 1);
  EXPECT_EQ(plan.strides[1][0], 0);
  EXPECT_EQ(plan.strides[1][1], 1);
  EXPECT_FALSE(plan.dense);
  // (5, 1, 9) and (7, 1) broadcast to (5, 7, 9): nothing merges.
  const Tensor c = zeros({5, 1, 9}), d = zeros({7, 1});
  const auto p2 = make_plan<2>(Shape{5, 7, 9}, {&c, &d});
  ASSERT_EQ(p2.ndim, 3);
  EXPECT_EQ(p2.strides[0][0], 9);
  EXPECT_EQ(p2.strides[0][1], 0);
  EXPECT_EQ(p2.strides[0][2], 1);
  EXPECT_EQ(p2.strides[1][0], 0);
  EXPECT_EQ(p2.strides[1][1], 1);
  EXPECT_EQ(p2.strides[1][2], 0);
}

TEST(CudaLayoutTest, ViewsMergeWhereEveryOperandAllows) {
  // A transposed (6, 10) view of a (10, 6) tensor: strides (1, 6), no merge.
  const auto t = make_strided<1>(Shape{6, 10}, {Strides{1, 6}});
  ASSERT_EQ(t.ndim, 2);
  EXPECT_FALSE(t.dense);
  // A column slice (4, 3) of (4, 10): rows of 3 with row stride 10 stay two axes; extent-1 axes
  // vanish.
  const auto s = make_strided<1>(Shape{4, 1, 3}, {Strides{10, 99, 1}});
  ASSERT_EQ(s.ndim, 2);
  EXPECT_EQ(s.sizes[0], 4);
  EXPECT_EQ(s.sizes[1], 3);
  // Two operands: one contiguous (2, 3, 4), one a (2, 12)-contiguous view with padded rows:
  // the last two axes merge for both, the first does not for the second.
  const auto m = make_strided<2>(Shape{2, 3, 4}, {Strides{12, 4, 1}, Strides{20, 4, 1}});
  ASSERT_EQ(m.ndim, 2);
  EXPECT_EQ(m.sizes[0], 2);
  EXPECT_EQ(m.sizes[1], 12);
  EXPECT_EQ(m.strides[1][0], 20);
  // A scalar and an empty tensor.
  const auto scalar = make_strided<1>(Shape{}, {Strides{}});
  EXPECT_EQ(scalar.ndim, 1);
  EXPECT_EQ(scalar.numel, 1);
  EXPECT_TRUE(scalar.dense);
  EXPECT_EQ(make_strided<1>(Shape{3, 0}, {Strides{0, 1}}).numel, 0);
}

TEST(CudaLayoutTest, LargeOffsetsNeed64BitIndexing) {
  // 2^31 elements, or a small view whose offsets reach past 2^31.
  EXPECT_FALSE(make_strided<1>(Shape{std::int64_t{1} << 31}, {Strides{1}}).index32);
  EXPECT_TRUE(make_strided<1>(Shape{(std::int64_t{1} << 31) - 1}, {Strides{1}}).index32);
  EXPECT_FALSE(make_strided<1>(Shape{3, 2}, {Strides{std::int64_t{1} << 30, 1}}).index32);
}

TEST(CudaLayoutTest, TooManyAxesAfterMergingIsAShapeError) {
  // 11 axes of extent 2, each with a stride that prevents merging.
  std::vector<std::int64_t> dims(11, 2), strides;
  for (int i = 0; i < 11; ++i) strides.push_back(std::int64_t{1} << (2 * (10 - i)));
  EXPECT_THROW(make_strided<1>(Shape(dims), {strides}), ShapeError);
}

TEST(CudaLayoutTest, MatmulOperandsAreRowMajorTransposedOrCopied) {
  using detail::classify_matrix;
  using detail::MatrixKind;
  // Contiguous (20, 30).
  auto m = classify_matrix(20, 30, 30, 1);
  EXPECT_EQ(m.kind, MatrixKind::row_major);
  EXPECT_EQ(m.ld, 30);
  // A padded view: row stride 50.
  m = classify_matrix(20, 30, 50, 1);
  EXPECT_EQ(m.kind, MatrixKind::row_major);
  EXPECT_EQ(m.ld, 50);
  // The transpose of a contiguous (30, 20): strides (1, 20) -> stored (30, 20), ld 20.
  m = classify_matrix(20, 30, 1, 20);
  EXPECT_EQ(m.kind, MatrixKind::transposed);
  EXPECT_EQ(m.rows, 30);
  EXPECT_EQ(m.cols, 20);
  EXPECT_EQ(m.ld, 20);
  // Gaps in both axes, stride-0 rows, and overlapping rows are copied.
  EXPECT_EQ(classify_matrix(20, 25, 100, 2).kind, MatrixKind::copy);
  EXPECT_EQ(classify_matrix(20, 30, 0, 1).kind, MatrixKind::copy);
  EXPECT_EQ(classify_matrix(20, 30, 10, 1).kind, MatrixKind::copy);
  // Vectors: a (1, 7) row and a (7, 1) column with any stride on their unit axis.
  m = classify_matrix(1, 7, 123, 1);
  EXPECT_EQ(m.kind, MatrixKind::row_major);
  EXPECT_EQ(m.ld, 7);
  m = classify_matrix(7, 1, 5, 77);
  EXPECT_EQ(m.kind, MatrixKind::row_major);
  EXPECT_EQ(m.ld, 5);
}

TEST(CudaLayoutTest, BatchAxesFoldIntoOneStrideOrAreCopied) {
  using detail::single_batch_stride;
  // Contiguous (3, 4, M=5, K=6): batch (3, 4) walks with stride 30.
  EXPECT_EQ(single_batch_stride({3, 4}, {120, 30}, Shape{3, 4}), 30);
  // Broadcast along the whole batch: stride 0.
  EXPECT_EQ(single_batch_stride({1, 1}, {30, 30}, Shape{3, 4}), 0);
  EXPECT_EQ(single_batch_stride({}, {}, Shape{}), 0);
  // Broadcast on the inner batch axis only: no single stride.
  EXPECT_EQ(single_batch_stride({3, 1}, {30, 30}, Shape{3, 4}), -1);
  // Broadcast on the outer axis only: no single stride either.
  EXPECT_EQ(single_batch_stride({1, 4}, {120, 30}, Shape{3, 4}), -1);
  // Extent-1 batch axes of the output are skipped.
  EXPECT_EQ(single_batch_stride({3, 1, 4}, {120, 999, 30}, Shape{3, 1, 4}), 30);
}

}  // namespace
}  // namespace mixprec::cuda
