// The gradient-ready hook of the backward engine (internal): grad() that reports each input's
// gradient as soon as it is final, while the backward pass goes on. Data-parallel training
// (src/distributed/overlapped_reducer.*) uses it to all-reduce the gradients of the last layers
// while the first layers' gradients are still being computed, as PyTorch DDP does.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "mixprec/autograd.h"
#include "mixprec/tensor.h"

namespace mixprec::autograd {

// Called with an input's index in `inputs` and its gradient. The tensor is the one that
// grad_reporting_ready() returns at that index; it is contiguous and owned by nothing else (no
// other gradient, no tensor the backward pass still reads, not the caller's output_gradient), so
// the hook may read and overwrite it, on another thread too, while the backward pass continues.
using GradientReadyHook = std::function<void(std::size_t index, const Tensor& gradient)>;

// grad(output, inputs, output_gradient, retain) with `on_ready` called on the calling thread once
// for each input, as soon as no contribution to its gradient is pending in the graph: in the
// order the engine finishes them (the last layers first), then, after the pass, the inputs that
// no gradient reached (zeros). An exception of `on_ready` ends the pass and propagates. With an
// empty `on_ready` this is grad() itself.
std::vector<Tensor> grad_reporting_ready(const Tensor& output, const std::vector<Tensor>& inputs,
                                         const GradientReadyHook& on_ready,
                                         const Tensor& output_gradient = Tensor(),
                                         RetainGraph retain = RetainGraph::no);

}  // namespace mixprec::autograd
