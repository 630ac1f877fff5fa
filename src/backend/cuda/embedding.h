// The embedding lookup and its deterministic scatter-add on CUDA (mirrors cpu/embedding.h) with
// own kernels (kernels/embedding.cu, bodies in kernels/embedding_kernels.cuh).
//  - gather: one thread per output element. The ids are NOT read back to the host (a host sync per
//    step): a row whose id is outside [0, V) is written as NaN and never read out of bounds, so a
//    bad id shows as a NaN loss (the convention of cuda::one_hot). Ids coming from the host are
//    checked by the CPU before they are uploaded where the caller does so.
//  - scatter-add: the positions sorted by (id, position) with a bitonic network of 64-bit keys
//    (log2(n)(log2(n) + 1) / 2 launches of independent compare-exchanges; n = 8192 tokens: 91
//    launches of 8192 threads), then one thread per (run of an id, column) adding that id's
//    gradients in position order in float32 (float64 for a float64 table): the CPU's sums, bit for
//    bit, with no atomics and no host synchronization.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// Preconditions (the op layer checks them): NnKernels::embedding_gather / embedding_scatter_add.
Tensor embedding_gather(const Tensor& table, const Tensor& ids, DType out_dtype);
Tensor embedding_scatter_add(const Tensor& g, const Tensor& ids, std::int64_t vocab,
                             DType table_dtype);

#if MIXPREC_HAVE_CUDA
namespace kernels {

// The sorted key array's length for n positions: the next power of two (>= 1).
std::int64_t embedding_padded(std::int64_t n);

// out (n, C) of out_dtype from n contiguous ids (int32/int64) and the contiguous table (V, C).
void embedding_gather(DType id_dtype, const void* ids, std::int64_t n, DType table_dtype,
                      const void* table, std::int64_t vocab, std::int64_t c, DType out_dtype,
                      void* out, cudaStream_t s);
// out (vocab, C) of table_dtype, zeroed by the caller (rows of absent ids stay 0), from g (n, C) of
// g_dtype; keys: embedding_padded(n) 64-bit scratch values. n < 2^32.
void embedding_scatter_add(DType id_dtype, const void* ids, std::int64_t n, DType g_dtype,
                           const void* g, std::int64_t vocab, std::int64_t c, DType table_dtype,
                           void* keys, void* out, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
