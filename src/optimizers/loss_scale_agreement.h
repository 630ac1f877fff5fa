// The internal hook through which data-parallel training (src/distributed/data_parallel.cpp)
// makes every rank reach the same loss-scaling verdict: between the unscale-and-check pass and
// apply_gradients, the optimizer's found_inf flag is handed to a combining function (an all-reduce
// with max over the ranks) that rewrites it in place. The single-process path never calls it.
#pragma once

#include <functional>

#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/tensor.h"

namespace mixprec::optimizers::detail {

// Calls `combine` with the optimizer's found_inf flag: a 0-d int32 tensor aliasing the loss-scale
// state on its device (nonzero: the last check saw Inf/NaN). Whatever `combine` writes into it is
// the verdict that the next apply_gradients(UnscaledGradients, ...) reads; the record of the check
// stays valid (the gradients are not checked again).
void combine_found_inf(mixed_precision::LossScaleOptimizer& optimizer,
                       const std::function<void(Tensor& flag)>& combine);

}  // namespace mixprec::optimizers::detail
