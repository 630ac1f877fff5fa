// Batch normalization on CUDA (mirrors cpu/batch_norm.h) with own kernels (kernels/batch_norm.cu)
// rather than cuDNN's deprecated batch-norm API: x (..., C) is a row-major (M, C) matrix, M = numel
// / C (NHWC: every pixel a row). Statistics and parameters in float32 (float64 for float64 x):
//  - per-channel reductions in two deterministic steps: thread (p, c) of parts * C threads reduces
//    rows p, p + parts, p + 2 parts, ... in float (consecutive threads read consecutive channels:
//    coalesced), then one block per channel combines the `parts` partial results in double in a
//    fixed order (block_ordered_sum); no atomics, so results do not vary from run to run;
//  - the statistics in one pass over x: Welford's recurrence per part (on x minus a sample of the
//    channel, so that a large mean does not cost precision), the parts combined by Chan's formula:
//    the mean and the BIASED variance, as the CPU's two passes give them up to rounding;
//  - y = (x - mean) * (gamma / sqrt(variance + epsilon)) + beta computed in float, rounded once;
//  - backward with the two per-channel sums sum(dy) and sum(dy * (x - mean)).
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "core/op_kinds.h"
#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec {
// backend/nn_kernels.h (declared here so that the kernels' .cu files do not see the ops).
struct BatchNormTrainingResult;
struct BatchNormGradients;
enum class BatchNormStats;
}  // namespace mixprec

namespace mixprec::cuda {

// BatchNormTrainingResult, BatchNormGradients and BatchNormStats: backend/nn_kernels.h.
// Preconditions (the op layer checks them): x floating on a CUDA device, rank >= 1, at least one
// row; gamma, beta and the statistics (C) on the same device in float32 or x's dtype (float64 for
// float64 x); epsilon > 0. Formulas as in cpu/batch_norm.h.
BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon);
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon);
BatchNormGradients batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       BatchNormStats statistics);

// The fused batch normalization + activation (NnKernels::batch_norm_activation_*): y = act(bn(x))
// with pre = bn(x) and act(pre) in float32, rounded once; the backward recomputes pre from x (the
// CPU's fused kernels' arithmetic, cpu/batch_norm_activation.h). x float32, float16 or bfloat16
// (DTypeError otherwise); act relu, relu6, sigmoid or silu (ValueError otherwise).
BatchNormTrainingResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon,
                                                       UnaryOp act);
Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       UnaryOp act);
BatchNormGradients batch_norm_activation_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& mean, const Tensor& variance,
                                                  double epsilon, BatchNormStats statistics,
                                                  UnaryOp act);

// The kernel launchers (kernels/*.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// x, dy: contiguous (rows, channels) of `dtype`; per-channel vectors (C) of the statistics type P
// (float; double for float64). `partials`: 2 * parts * C values of P, parts = batch_norm_parts:
// about 2^17 pass-1 threads of one 16-byte vector of channels each (one channel where C is no
// multiple of the vector), at most 8192 parts and at most the rows.
std::int64_t batch_norm_parts(DType dtype, std::int64_t rows, std::int64_t channels);
// The row parts of the elementwise passes (normalize, dx) for `lanes` channel vectors per row:
// about 2^18 threads, at most the rows.
std::int64_t batch_norm_elementwise_parts(std::int64_t lanes, std::int64_t rows);

// mean[c] and the biased variance[c] of x over the rows, in one pass over x (Welford per part,
// Chan's combination of the parts in double).
void batch_norm_statistics(DType dtype, const void* x, std::int64_t rows, std::int64_t channels,
                           void* partials, void* mean, void* variance, cudaStream_t s);

// The activation fused after the normalization (the fused op, batch_norm_activation_*): none for
// plain batch normalization. Fused activations are for float32, float16 and bfloat16 x.
enum class BnActivation { none, relu, relu6, sigmoid, silu };

// y = act((x - mean) * scale + beta) with scale = gamma / sqrt(variance + epsilon) (1 / sqrt
// first, as the CPU), computed in P, rounded once.
void batch_norm_normalize(DType dtype, const void* x, const void* mean, const void* variance,
                          const void* gamma, const void* beta, double epsilon, std::int64_t rows,
                          std::int64_t channels, void* y, cudaStream_t s,
                          BnActivation act = BnActivation::none);
// dbeta = sum(dz), dgamma = sum(dz (x - mean)) inv_std, and
// dx = gamma inv_std (dz - a - (x - mean) b) with a = dbeta / M, b = sum(dz (x - mean)) inv_std^2 /
// M for batch statistics, a = b = 0 for moving ones. `coefficients`: 3 * C values of P.
// dz = dy, or with a fused activation dz = dy * act'((x - mean) * scale + beta), the forward's
// scale and pre-activation bit for bit, never rounded (beta read only then; may be null for none).
void batch_norm_backward(DType dtype, const void* dy, const void* x, const void* mean,
                         const void* variance, const void* gamma, const void* beta, double epsilon,
                         bool batch_statistics, std::int64_t rows, std::int64_t channels,
                         void* partials, void* coefficients, void* dgamma, void* dbeta, void* dx,
                         cudaStream_t s, BnActivation act = BnActivation::none);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
