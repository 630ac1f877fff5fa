// CPU batch normalization over the last axis of x (..., C), seen as a row-major (M, C) matrix
// with M = numel / C (NHWC: every pixel of every image is a row). Two implementations:
//  - OpenMP loops for every floating dtype, the default: for float32, float16 and bfloat16 the
//    register-resident sweeps of batch_norm_activation_sweeps.h (16-bit storage read and written
//    directly, statistics in one sweep over x), for float64 the generic loops of
//    batch_norm_loops.h;
//  - oneDNN batch_normalization (forward training, forward inference, backward) for float32 and,
//    where the CPU runs bfloat16 natively (use_native_bf16()), bfloat16 data, with float32
//    scale/shift and statistics; primitives are cached by geometry, data type, flags and epsilon.
//    Only on request (BatchNormImpl::onednn): on EfficientNet-B0's and ResNet-50's shapes at 64x64
//    (one thread, 2026-11-26) it took 1.1-1.2x the loops' time forward and 1.5-2x backward, and
//    its internal barriers stall when the two cores are shared.
// Statistics are float32 (float64 for float64 x); the mean and the BIASED variance are never
// computed as E[x^2] - E[x]^2.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cpu/dnnl_context.h"
#include "backend/nn_kernels.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// `automatic` and `reference` run the loops; `onednn` runs oneDNN where it applies (float32, and
// bfloat16 with native support, when oneDNN has a jit kernel for the geometry) and the loops
// elsewhere (tests compare the two).
enum class BatchNormImpl { automatic, reference, onednn };

// The float32 (float64 for float64 x) dtype of statistics and parameter gradients.
DType batch_norm_stat_dtype(DType x_dtype);

// Preconditions (checked by the op layer): x CPU, floating, rank >= 1 with C = x.dim(-1), at least
// one row; gamma, beta (C) in float32 or x's dtype (float64 for float64 x); epsilon > 0.
// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta with the batch statistics.
BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon,
                                            BatchNormImpl impl = BatchNormImpl::automatic);

// The same with given statistics mean, variance (C) (float32 or x's dtype).
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon,
                            BatchNormImpl impl = BatchNormImpl::automatic);

// dy: the gradient of y (x's shape and dtype). With xhat = (x - mean) * inv_std,
// inv_std = 1 / sqrt(variance + epsilon), sums over the M rows:
//   dbeta = sum(dy), dgamma = sum(dy * xhat),
//   batch:  dx = gamma * inv_std * (dy - dbeta / M - xhat * dgamma / M)
//   moving: dx = gamma * inv_std * dy
// `mean` and `variance` are the statistics the forward used.
BatchNormGradients batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       BatchNormStats stats,
                                       BatchNormImpl impl = BatchNormImpl::automatic);

// What batch_norm_training runs for x with `impl`: "oneDNN <kernel name>" (e.g. "oneDNN
// bnorm_jit:avx512_core") or "reference loops". oneDNN runs only when asked and where it has a jit
// kernel for the geometry; its generic C++ kernels (C = 3: "nspc_bnorm:any") are slower still.
std::string batch_norm_implementation(const Tensor& x,
                                      BatchNormImpl impl = BatchNormImpl::automatic);

// The cache of compiled oneDNN batch-norm primitives (same statistics as the matmul cache).
PrimitiveCacheStats batch_norm_cache_stats();
void clear_batch_norm_cache();

}  // namespace mixprec::cpu
