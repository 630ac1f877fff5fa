// Host-side plan and index math of the CUDA reductions (backend/cuda/reduce.h,
// kernels/reduce_index.h), without a GPU: which layout a reduction reads (no permutation copy for
// a contiguous run of reduced axes: global average pooling over NHWC is (N, H*W, C), reduced over
// the middle axis and read coalesced along C), and that the kernel's element and partial-result
// indices cover every input element once and every output once.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "backend/cuda/kernels/reduce_index.h"
#include "backend/cuda/reduce.h"

namespace mixprec::cuda {
namespace {

using detail::plan_reduce;
using detail::ReduceLayout;

TEST(CudaReducePlanTest, GlobalAveragePoolingIsAMiddleAxisReduction) {
  const detail::ReducePlan p = plan_reduce(Shape{8, 7, 7, 1280}, {false, true, true, false});
  EXPECT_EQ(p.layout, ReduceLayout::middle);
  EXPECT_EQ(p.outer, 8);
  EXPECT_EQ(p.length, 49);
  EXPECT_EQ(p.inner, 1280);
}

TEST(CudaReducePlanTest, LeadingAxesAreTheMiddleCaseWithOneOuterItem) {
  // Bias gradients: (M, N) summed over M.
  const detail::ReducePlan p = plan_reduce(Shape{4096, 10}, {true, false});
  EXPECT_EQ(p.layout, ReduceLayout::middle);
  EXPECT_EQ(p.outer, 1);
  EXPECT_EQ(p.length, 4096);
  EXPECT_EQ(p.inner, 10);
}

TEST(CudaReducePlanTest, TrailingAxesAreRows) {
  const detail::ReducePlan p = plan_reduce(Shape{6, 5, 4}, {false, true, true});
  EXPECT_EQ(p.layout, ReduceLayout::rows);
  EXPECT_EQ(p.outer, 6);
  EXPECT_EQ(p.length, 20);
  EXPECT_EQ(p.inner, 1);
  // Everything reduced: one row.
  const detail::ReducePlan all = plan_reduce(Shape{6, 5}, {true, true});
  EXPECT_EQ(all.layout, ReduceLayout::rows);
  EXPECT_EQ(all.outer, 1);
  EXPECT_EQ(all.length, 30);
}

TEST(CudaReducePlanTest, ExtentOneAxesDoNotBreakARun) {
  // A kept axis of extent 1 between reduced ones, and a reduced axis of extent 1 outside them.
  const detail::ReducePlan p = plan_reduce(Shape{3, 4, 1, 5, 6}, {true, true, false, true, false});
  EXPECT_EQ(p.layout, ReduceLayout::middle);
  EXPECT_EQ(p.outer, 1);
  EXPECT_EQ(p.length, 60);
  EXPECT_EQ(p.inner, 6);
  const detail::ReducePlan q = plan_reduce(Shape{3, 1, 4}, {false, true, false});
  EXPECT_EQ(q.layout, ReduceLayout::rows);  // nothing of extent > 1 reduced: rows of one
  EXPECT_EQ(q.outer, 12);
  EXPECT_EQ(q.length, 1);
}

TEST(CudaReducePlanTest, SeparatedReducedAxesArePermuted) {
  EXPECT_EQ(plan_reduce(Shape{3, 4, 5}, {true, false, true}).layout, ReduceLayout::permuted);
  // More outer items than a grid's z extent.
  EXPECT_EQ(plan_reduce(Shape{70000, 3, 2}, {false, true, false}).layout, ReduceLayout::permuted);
}

// Simulates the kernel's blocks and threads on the host: every element (o, r, c) is read by
// exactly one (block, thread), and the finishing pass reads each partial exactly once.
void check_cover(std::int64_t outer, std::int64_t length, std::int64_t inner, std::int64_t splits) {
  SCOPED_TRACE(::testing::Message()
               << outer << " x " << length << " x " << inner << " splits " << splits);
  std::vector<int> reads(static_cast<std::size_t>(outer * length * inner), 0);
  std::vector<int> partial_writes(static_cast<std::size_t>(splits * outer * inner), 0);
  const std::int64_t tiles = (inner + 31) / 32;
  for (std::int64_t bz = 0; bz < outer; ++bz) {
    for (std::int64_t by = 0; by < splits; ++by) {
      const kernels::RowRange rows = kernels::middle_split_rows(by, splits, length);
      ASSERT_LE(rows.begin, rows.end);
      for (std::int64_t bx = 0; bx < tiles; ++bx) {
        for (std::int64_t tx = 0; tx < 32; ++tx) {
          const std::int64_t c = bx * 32 + tx;
          if (c >= inner) continue;
          for (std::int64_t ty = 0; ty < 8; ++ty) {
            for (std::int64_t r = rows.begin + ty; r < rows.end; r += 8) {
              ++reads[static_cast<std::size_t>(kernels::middle_offset(bz, r, c, length, inner))];
            }
          }
          ++partial_writes[static_cast<std::size_t>(
              kernels::middle_partial_index(bz, by, c, splits, inner))];
        }
      }
    }
  }
  for (int n : reads) ASSERT_EQ(n, 1);
  for (int n : partial_writes) ASSERT_EQ(n, 1);
  std::set<std::int64_t> finished;
  for (std::int64_t i = 0; i < outer * inner; ++i) {
    for (std::int64_t j = 0; j < splits; ++j) {
      const std::int64_t at = kernels::middle_partial_of_item(i, j, splits, inner);
      EXPECT_TRUE(finished.insert(at).second);
      // Item i = o * inner + c: split j's partial of that (o, c).
      EXPECT_EQ(at, kernels::middle_partial_index(i / inner, j, i % inner, splits, inner));
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(finished.size()), splits * outer * inner);
}

TEST(CudaReducePlanTest, KernelIndicesCoverEveryElementOnce) {
  check_cover(1, 10, 3, 1);
  check_cover(3, 49, 72, 1);
  check_cover(2, 1000, 33, 4);
  check_cover(2, 9, 5, 4);  // splits whose last range is empty
  check_cover(5, 1, 64, 1);
}

TEST(CudaReducePlanTest, SplitsFillTheGpuOnlyWhenOutputsAreFew) {
  // GAP of a big batch: enough (outer, tile) blocks already.
  EXPECT_EQ(kernels::middle_splits(256, 49, 1280, 512, 256), 1);
  // Short reductions are never split.
  EXPECT_EQ(kernels::middle_splits(1, 200, 10, 512, 256), 1);
  // One output tile over a long axis: split by length, capped by the block target.
  EXPECT_EQ(kernels::middle_splits(1, 4096, 10, 512, 256), 16);
  EXPECT_EQ(kernels::middle_splits(1, 1 << 20, 10, 512, 256), 512);
  EXPECT_EQ(kernels::middle_splits(2, 3136, 72, 512, 256), 13);  // 6 tiles: min(13, 86)
}

}  // namespace
}  // namespace mixprec::cuda
