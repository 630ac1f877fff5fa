// The synchronized (global-batch) training path of BatchNormalization (options.synchronized, or
// the SyncBatchNormalization convenience): batch statistics over every rank's shard, composed from
// differentiable ops so that autograd carries the cross-rank terms of the gradient. Internal.
#pragma once

#include <cstdint>

#include "mixprec/nn_ops.h"
#include "mixprec/tensor.h"

namespace mixprec::layers::detail {

struct SyncBatchNormOutput {
  BatchNormOutput out;     // y in x's dtype; mean and biased variance (C) over the global batch
  std::int64_t count = 0;  // values per channel over the whole group (sum of the ranks' rows)
};

// Training-mode batch normalisation of x (..., C) with the statistics of the global batch:
//   mean = all_reduce_sum(sum over rows of x) / n,
//   var  = all_reduce_sum(sum over rows of (x - mean)^2) / n   (biased),
//   y    = (x - mean) * rsqrt(var + epsilon) * gamma + beta,
// n = the rows of every rank together. Computed in gamma's dtype (float32, or float64 under a
// float64 policy) whatever x's dtype, and cast back to x's dtype. Two all-reduces of C values in
// the forward pass (the centred second pass avoids the cancellation of E[x^2] - E[x]^2 in
// float32) and two in the backward pass (the all-reduce's backward). Every rank must call it
// in the same order. gamma and beta: (C), gamma's dtype.
SyncBatchNormOutput sync_batch_norm_training(const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, double epsilon);

}  // namespace mixprec::layers::detail
