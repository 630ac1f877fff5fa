// CPU layer normalization and RMS normalization over the last axis of x (..., C), seen as a
// row-major (M, C) matrix (mixprec/transformer_ops.h gives the contract). OpenMP over rows; each
// row is converted to the compute type P (float32; float64 for float64 x) a row at a time, its
// sums taken in double (mean, then the sum of squared deviations: two passes over the row, which
// stays in L1), the statistics stored in P, and y computed in P and rounded once:
//   layer: mean = P(sum(x) / C), variance = P(sum((x - mean)^2) / C), rstd = 1 / sqrt(variance +
//          epsilon) in P, y = ((x - mean) * rstd) * gamma + beta;
//   rms:   rstd = 1 / sqrt(P(sum(x^2) / C) + epsilon), y = (x * rstd) * gamma.
// The CUDA kernels (cuda/kernels/layer_norm_kernels.cuh) use the same expressions.
// The backward is one pass over the rows: per row the two sums mean(g) and mean(g * xhat)
// (g = dy * gamma) in double and dx; per fixed block of rows the column sums of dy * xhat and dy in
// P, the blocks added in double in block order (dgamma, dbeta: the same bits for any thread count).
#pragma once

#include "backend/nn_kernels.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Preconditions (the op layer checks them): see NnKernels::row_norm_forward / row_norm_backward.
RowNormResult row_norm_forward(RowNorm kind, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, double epsilon);
// The residual sum and its normalization in one pass over the rows (NnKernels::
// add_row_norm_forward): each row of a + b is added in P, rounded to the dtype as add rounds it
// and stored, and that rounded row is what the statistics and y read (still in L1).
AddRowNormResult add_row_norm_forward(RowNorm kind, const Tensor& a, const Tensor& b,
                                      const Tensor& gamma, const Tensor& beta, double epsilon);
RowNormGradients row_norm_backward(RowNorm kind, const Tensor& dy, const Tensor& x,
                                   const Tensor& gamma, const Tensor& mean, const Tensor& rstd);

}  // namespace mixprec::cpu
