// The sparse softmax crossentropy on CUDA (TensorKernels::sparse_crossentropy_forward and
// _backward; mirrors cpu/sparse_crossentropy.h), with own kernels
// (kernels/sparse_crossentropy_kernels.cuh):
//  - rows: one warp per row of logits, lanes reading consecutive classes: the max, the sum of
//    exp(x - max) in double in a fixed order, the label's term; a row whose label is ignored is
//    not read;
//  - mean: one block adds the rows' losses and counts the rows not ignored, in double in a fixed
//    order, and writes the mean and the count (device values: nothing waits for the host);
//  - backward: one thread per element writes (softmax - onehot) * g / count in the logits' dtype.
// No float32 copy of 16-bit logits is made; the order of every addition depends only on the shape:
// the same bits on every run.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "backend/tensor_kernels.h"
#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

SparseCrossentropyForward sparse_crossentropy_forward(const Tensor& logits, const Tensor& labels,
                                                      std::int64_t ignore);
Tensor sparse_crossentropy_backward(const Tensor& logits, const Tensor& labels, std::int64_t ignore,
                                    const Tensor& row_stats, const Tensor& count, const Tensor& g);

// The kernel launchers (kernels/sparse_crossentropy.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// Warps of the rows pass: one per row, at most kMaxRowWarps (a grid-stride loop covers the rest).
std::int64_t sparse_crossentropy_row_warps(std::int64_t rows);

// logits (rows, classes) of `dtype`, labels (rows) int64, all contiguous on the device; loss (rows)
// scratch, stats (rows, 2), mean and count (one value each) of the compute type.
void sparse_crossentropy_forward(DType dtype, const void* logits, const std::int64_t* labels,
                                 std::int64_t rows, std::int64_t classes, std::int64_t ignore,
                                 void* loss, void* stats, void* mean, void* count, cudaStream_t s);
// dx (rows, classes) of `dtype`; stats, g and count of the compute type.
void sparse_crossentropy_backward(DType dtype, const void* logits, const std::int64_t* labels,
                                  std::int64_t rows, std::int64_t classes, std::int64_t ignore,
                                  const void* stats, const void* g, const void* count, void* dx,
                                  cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
