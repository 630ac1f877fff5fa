// Dropout's masked multiply on CUDA (the CPU loop lives in layers/dropout.cpp): out = x * m with
// m_i = keep where core::counter_keeps(base, i, threshold) and 0 elsewhere, i the row-major index
// of the element. The mask is never stored: the backward runs the same kernel on the output
// gradient with the same (base, threshold, keep), regenerating it (8 integer multiplies per element
// against the 2 bytes a stored 16-bit mask would cost to read back: a memory-bound op either way).
// No host synchronisation: the key is a host integer passed by value (or, in a step captured for
// CUDA graph replays, read from the replay buffer in device memory).
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>

#include "mixprec/dtype.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// x floating (any strides) on a CUDA device; returns a new contiguous tensor of x's shape and dtype
// on x's device. `keep` must be exactly representable in x's dtype (the caller rounds
// 1 / (1 - rate) to it): each element is computed as float(x) * float(m) (double for float64) and
// rounded once, the CPU's x * mask bit for bit; a dropped NaN or Inf stays NaN (x * 0), so an
// overflowed gradient is still seen by loss scaling.
Tensor dropout_apply(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep);

// The kernel launcher (kernels/dropout.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// out[i] = x[i] * (counter_keeps(base, i, threshold) ? keep : 0) for i in [0, n); x, out
// contiguous, floating `dtype`, n >= 1. With base_in_memory set (a step captured for replays,
// core::ReplayParameters) the key is *base_in_memory, read by the kernel when it runs.
void dropout_apply(DType dtype, const void* x, void* out, std::int64_t n, std::uint64_t base,
                   const std::uint64_t* base_in_memory, std::uint64_t threshold, double keep,
                   cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
