// CUDA argmax and one_hot (the CPU loops live in ops/indexing.cpp).
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstddef>
#include <cstdint>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// The index (int64) of the first maximum of x along `axis` (normalised; extent > 0), with the
// first NaN the maximum; result shape: x's without `axis`, written into `out` (contiguous, int64,
// x.numel() / x.shape()[axis] elements, on x's device).
void argmax(const Tensor& x, int axis, const Tensor& out);

// out (contiguous, indices.shape() + (depth,), any dtype, on indices' device) =
// one_hot(indices, depth): row i is 1 at column indices[i] and 0 elsewhere. indices: int32, int64
// or uint8, any strides, on a CUDA device (the caller has checked dtype and depth). The range is
// not checked on the host (that would read the indices back: a sync per step): a row whose index is
// outside [0, depth) is all NaN for floating outputs, so a bad label shows as a NaN loss, and all
// zeros for integer and bool outputs.
void one_hot(const Tensor& indices, std::int64_t depth, const Tensor& out);

// The bit patterns one_hot writes for a dtype (the low dtype_size(dtype) bytes of each): 1, 0,
// and the fill of a row with an out-of-range index (a quiet NaN for floating dtypes, else 0).
struct OneHotPatterns {
  std::uint64_t one = 0, zero = 0, bad = 0;
};
OneHotPatterns one_hot_patterns(DType dtype);

// The kernel launcher (kernels/one_hot.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// out (count, depth) contiguous of `element_size`-byte elements (1, 2, 4 or 8) from `count`
// contiguous indices of `index_dtype` (int32, int64 or uint8); count * depth >= 1.
void one_hot(DType index_dtype, const void* indices, std::int64_t count, std::int64_t depth,
             std::size_t element_size, const OneHotPatterns& patterns, void* out, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
