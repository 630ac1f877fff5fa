// Index arithmetic of the middle-axis reduction (kernels/reduce.cu), callable on the host so that
// tests/unit/cuda_reduce_plan_test.cpp checks it without a GPU. x is contiguous
// (outer, length, inner); the output is (outer, inner). Block (bx, by, bz) with threads (32, 8)
// covers inner positions bx * 32 + threadIdx.x of outer item bz and the by-th of `splits` ranges
// of the reduced axis, each thread walking rows threadIdx.y, threadIdx.y + 8, ...: the 32 threads
// of a warp read 32 consecutive inner elements of one row (coalesced; global average pooling over
// NHWC reads channels contiguously), no permutation or copy of x first.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MIXPREC_REDUCE_HD __host__ __device__
#else
#define MIXPREC_REDUCE_HD
#endif

namespace mixprec::cuda::kernels {

// The element (o, r, c) of x.
MIXPREC_REDUCE_HD inline std::int64_t middle_offset(std::int64_t o, std::int64_t r, std::int64_t c,
                                                    std::int64_t length, std::int64_t inner) {
  return (o * length + r) * inner + c;
}

// Rows [begin, end) of the reduced axis that split `split` of `splits` covers.
struct RowRange {
  std::int64_t begin = 0, end = 0;
};
MIXPREC_REDUCE_HD inline RowRange middle_split_rows(std::int64_t split, std::int64_t splits,
                                                    std::int64_t length) {
  const std::int64_t per_split = (length + splits - 1) / splits;
  const std::int64_t begin = split * per_split;
  const std::int64_t end = begin + per_split < length ? begin + per_split : length;
  return {begin < length ? begin : length, end};
}

// Where the partial result of (o, split, c) lives in the scratch of splits * outer * inner
// doubles, and where the finishing pass reads part j of output item i = o * inner + c.
MIXPREC_REDUCE_HD inline std::int64_t middle_partial_index(std::int64_t o, std::int64_t split,
                                                           std::int64_t c, std::int64_t splits,
                                                           std::int64_t inner) {
  return (o * splits + split) * inner + c;
}
MIXPREC_REDUCE_HD inline std::int64_t middle_partial_of_item(std::int64_t i, std::int64_t j,
                                                             std::int64_t splits,
                                                             std::int64_t inner) {
  return middle_partial_index(i / inner, j, i % inner, splits, inner);
}

// Blocks along y per (outer, 32-column tile): enough to fill the GPU when outer * tiles is small,
// each with at least min_rows rows (the kernel's constant; 1 means no split).
MIXPREC_REDUCE_HD inline std::int64_t middle_splits(std::int64_t outer, std::int64_t length,
                                                    std::int64_t inner, std::int64_t target_blocks,
                                                    std::int64_t min_rows) {
  const std::int64_t tiles = outer * ((inner + 31) / 32);
  if (tiles >= target_blocks / 2 || length <= min_rows) return 1;
  const std::int64_t by_length = (length + min_rows - 1) / min_rows;
  const std::int64_t by_blocks = (target_blocks + tiles - 1) / tiles;
  return by_length < by_blocks ? by_length : by_blocks;
}

}  // namespace mixprec::cuda::kernels
