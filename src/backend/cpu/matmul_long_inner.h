// Products with a long inner extent and a small result on the CPU, x^T . dy with x (K, M) and
// dy (K, N) row-major: the filter gradient of a pointwise convolution (K = batch * height * width
// positions, M and N its channels) and of a Dense layer over many rows. oneDNN's matmul splits
// its work over blocks of the result only, so such a product (one or two blocks) runs on one
// thread, and it reads x transposed; oneDNN's inner-product backward-weights primitive (the same
// product, diff_weights = diff_dst^T . src) runs its GEMM with the reduction over K split between
// the threads and reads x as stored. Measured 2026-11-26 on a 2-core Xeon with AMX, cold caches,
// EfficientNet-B0's shapes at 64x64 batch 32: 0.22 ms against 0.26 ms (bf16, K 32768, 32 x 16),
// 0.08 against 0.15 ms (bf16, K 2048, 144 x 40), 0.31 against 0.45 ms (float32, K 32768, 16 x 96).
//
// The split of K follows oneDNN's partition of the reduction between the threads, so the float32
// summation order (and so the last bits of the result) depends on the thread count; for a given
// thread count the result is reproducible.
#pragma once

#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Whether long_inner_product takes (M, K) x (K, N): float32 or bfloat16 (on a CPU with native
// bf16) operands, K >= kLongInnerMinK and M * N <= kLongInnerMaxResult.
bool takes_long_inner(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k);

// out (M, N), contiguous and allocated by the caller, of float32 or the operands' dtype, =
// x^T . dy for contiguous row-major x (K, M) and dy (K, N) of one dtype (float32 or bfloat16);
// accumulated in float32 and rounded once. Preconditions as takes_long_inner (checked).
void long_inner_product(const Tensor& x, const Tensor& dy, Tensor& out);

}  // namespace mixprec::cpu
