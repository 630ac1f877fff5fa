// Differentiable collectives over the process group (include/mixprec/distributed/distributed.h):
// ops that record an autograd node, so that a computation spanning the ranks
// (SyncBatchNormalization's global batch statistics) has the gradient of the global loss. Internal
// to the library.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::ops {

// y = the sum of x over every rank of the group (every rank gets the same y). Backward: the
// gradient of x on each rank is the sum over the ranks of the gradient reaching y, i.e. the
// gradient of the sum of the ranks' losses. Every rank must call it, in the same order, with x of
// the same shape and dtype, and every rank must run the backward pass that reaches it. In a group
// of one it is a copy of x (and its backward passes the gradient through).
Tensor all_reduce_sum(const Tensor& x);

}  // namespace mixprec::ops
