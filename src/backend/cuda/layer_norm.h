// Layer normalization and RMS normalization on CUDA (mirrors cpu/layer_norm.h) with own kernels
// (kernels/layer_norm.cu, bodies in kernels/layer_norm_kernels.cuh): x (..., C) is a row-major
// (rows, C) matrix.
//  - forward: one block per row; the row's sums (mean, then squared deviations; rms: squares) in
//    double in block_ordered_sum's fixed order, the statistics in float32 (float64 for float64),
//    y computed in float and rounded once;
//  - backward: one block per row for dx (the two row sums mean(g), mean(g * xhat)); the parameter
//    gradients as column sums in two deterministic steps: parts * C threads each summing the rows
//    p, p + parts, ... of one column in float (coalesced), then one thread per column adding the
//    parts in double in part order. No atomics: the same bits on every run.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec {
// backend/nn_kernels.h (declared here so that the kernels' .cu files do not see the ops).
enum class RowNorm;
struct RowNormResult;
struct AddRowNormResult;
struct RowNormGradients;
}  // namespace mixprec

namespace mixprec::cuda {

// Preconditions (the op layer checks them): NnKernels::row_norm_forward / row_norm_backward.
RowNormResult row_norm_forward(RowNorm kind, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, double epsilon);
RowNormGradients row_norm_backward(RowNorm kind, const Tensor& dy, const Tensor& x,
                                   const Tensor& gamma, const Tensor& mean, const Tensor& rstd);
// NnKernels::add_row_norm_forward: one block per row reads a and b and writes the rounded sum and
// y (add_forward_kernel), the statistics as row_norm_forward's.
AddRowNormResult add_row_norm_forward(RowNorm kind, const Tensor& a, const Tensor& b,
                                      const Tensor& gamma, const Tensor& beta, double epsilon);

#if MIXPREC_HAVE_CUDA
namespace kernels {

// The parts of the column sums: about 2^17 threads, at most 4096 parts and at most the rows.
std::int64_t layer_norm_parts(std::int64_t rows, std::int64_t channels);

// x (rows, C) contiguous of `dtype`; gamma, beta: C values of P (float; double for float64) or
// null; mean, rstd: rows values of P. `rms`: RMS normalization (beta ignored, mean written 0).
// rows >= 1, C >= 1.
void layer_norm_forward(bool rms, DType dtype, const void* x, std::int64_t rows, std::int64_t c,
                        const void* gamma, const void* beta, double epsilon, void* y, void* mean,
                        void* rstd, cudaStream_t s);
// The same for the rows of sum = a + b (a, b, sum: (rows, C) contiguous of `dtype`), writing sum.
void layer_norm_add_forward(bool rms, DType dtype, const void* a, const void* b, std::int64_t rows,
                            std::int64_t c, const void* gamma, const void* beta, double epsilon,
                            void* sum, void* y, void* mean, void* rstd, cudaStream_t s);
// dx (rows, C) of `dtype`; dgamma, dbeta: C values of P; partials: 2 * layer_norm_parts * C
// values of P.
void layer_norm_backward(bool rms, DType dtype, const void* dy, const void* x, std::int64_t rows,
                         std::int64_t c, const void* gamma, const void* mean, const void* rstd,
                         void* partials, void* dx, void* dgamma, void* dbeta, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
