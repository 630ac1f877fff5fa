// Ops of Transformer models: layer normalization, RMS normalization over the last axis, and the
// embedding lookup. Like every op in ops.h they are differentiable and take float32, float16,
// bfloat16 and float64 data; 16-bit data is computed in float32 and rounded once on store.
// Statistics are float32 under every dtype (float64 for float64 x): the float32 island of
// DESIGN §2.3. Shapes are checked at the boundary (ShapeError naming the op and the shapes); a bad
// parameter (epsilon <= 0) is a ValueError; a dtype outside the contract is a DTypeError.
#pragma once

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// Layer normalization over the last axis of x (..., C), rank >= 1, C >= 1 (Keras
// LayerNormalization with axis = -1): for each row (one position of the leading axes)
//   mean = sum(x) / C,  variance = sum((x - mean)^2) / C   (biased; two passes, never
//   E[x^2] - E[x]^2, which cancels when |mean| >> std),
//   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta,   epsilon > 0 (Keras: 1e-3).
// gamma and beta have shape (C) and dtype float32 or x's dtype (float32 under mixed policies; the
// 16-bit type is accepted too; float64 with float64 x); either may be an undefined Tensor: no
// scale (gamma = 1) or no center (beta = 0). y has x's shape and dtype, rounded once. The row
// statistics are float32 (float64 for float64 x), kept by the backward, which is one fused pass:
// with xhat = (x - mean) * rstd, g = dy * gamma,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
//   dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy (in gamma's and beta's dtypes;
//   the sums over rows are deterministic: fixed blocks added in a fixed order).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon = 1e-3);

// RMS normalization over the last axis of x (..., C) (Keras 3 RMSNormalization):
//   y = x / sqrt(mean(x^2) + epsilon) * gamma,   epsilon > 0 (Keras: 1e-6),
// gamma (C) or undefined (no scale), with layer_norm's dtype rules. Backward: with
// rstd = 1 / sqrt(mean(x^2) + epsilon), xhat = x * rstd, g = dy * gamma,
//   dx = rstd * (g - xhat * mean(g * xhat)),  dgamma = sum over rows of dy * xhat.
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double epsilon = 1e-6);

// Embedding lookup: table (V, C) floating, ids int32 or int64 of any shape (rank 0 too) ->
// ids.shape + (C) in out_dtype: out[..., :] = table[ids[...], :], each element rounded once from
// the table's values (the same bits as casting the table to out_dtype first, without casting the
// whole table). out_dtype is floating; the table is float32 (any out_dtype) or out_dtype itself.
// An id outside [0, V) is a ValueError naming the id, its flat position and the shape of ids,
// raised before anything is read where the ids are on the CPU. On a CUDA device (ids and table
// on one device) the ids are not read back (no host synchronization per step): a row
// with an out-of-range id is written as NaN (never an out-of-bounds read), so the loss becomes
// NaN, and its gradient is dropped.
// Backward: the table gradient (V, C) in the table's dtype, a deterministic scatter-add: row v
// sums the output gradients of the positions holding id v in position order, in float32 (float64
// for a float64 table): the same bits whatever the thread count.
Tensor embedding_lookup(const Tensor& table, const Tensor& ids, DType out_dtype);

}  // namespace mixprec

#pragma GCC visibility pop
