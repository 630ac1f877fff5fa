// The gradient of the squeeze-and-excitation gate on CUDA (NnKernels::channel_gate_backward,
// mirrors cpu/binary_channel.h): for out = full * small with small broadcast per channel, d small
// is the sum over the broadcast axes of g * full, computed in one pass over g and full with own
// kernels (kernels/channel_gate.cu) instead of materialising g * full and reducing it.
//
// g and full are viewed as (groups, pixels, channels), channel innermost (NHWC), and the result as
// (groups, channels):
//  - pass 1: thread (n, p, l) of groups * parts * lanes threads sums g * full over the pixels
//    p, p + parts, p + 2 parts, ... of group n for channel l (16-bit storage with an even channel
//    count and 4-byte aligned operands: channels 2l and 2l + 1, read as one 4-byte pair), in float
//    (double for float64); consecutive threads read consecutive channels (coalesced);
//  - pass 2: each output (n, c) adds its `parts` partial sums in double in a fixed order and
//    rounds once to the dtype (through float, as the CPU's store_as does): one warp per output when
//    parts is large (lane l adds the parts l, l + 32, ..., then a butterfly over the lanes), one
//    thread per output otherwise; with one part, pass 1 writes the result itself.
// The order of every addition depends only on the shape, dtype and operand alignment, never on
// scheduling (no atomics): the same inputs give the same bits on every run.
#pragma once

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>
#include <optional>

#include "backend/channel_geometry.h"
#include "mixprec/dtype.h"
#include "mixprec/shape.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// g and full: one shape and floating dtype on one CUDA device (any strides: made contiguous);
// small_shape a per-channel broadcast of full's shape (channel_geometry defined), or full's shape
// itself (nothing broadcast: the products g * full, each rounded once, as mul). A new contiguous
// tensor of small_shape in g's dtype; zeros where full has no elements.
Tensor channel_gate_backward(const Tensor& g, const Tensor& full, const Shape& small_shape);

// The kernel launchers (kernels/channel_gate.cu), in builds with the CUDA backend only.
#if MIXPREC_HAVE_CUDA
namespace kernels {

// The work split of one call (see the header comment).
struct GatePlan {
  int vector = 1;            // channels per thread in pass 1: 2 (16-bit pairs) or 1
  std::int64_t parts = 1;    // pixel subsets per group in pass 1
  bool warp_finish = false;  // pass 2 runs one warp per output (else one thread per output)
  // The scratch pass 1 writes: groups * parts * channels values of the compute type (float;
  // double for float64); 0 with one part (pass 1 writes the result).
  std::int64_t partials = 0;
};

// parts: about 2^17 pass-1 threads, but at least 8 pixels per part (and at least one part).
// `aligned4`: both operands' data pointers are 4-byte aligned.
GatePlan channel_gate_plan(DType dtype, const ChannelGeometry& geometry, bool aligned4);

// out (groups, channels) of `dtype` = the sums of g * x over the pixels, g and x contiguous
// (groups, pixels, channels) of `dtype`; `partials` as the plan says (null when it says 0).
// channels >= 1 and groups >= 1; pixels may be 0 (zeros).
void channel_gate_backward(DType dtype, const GatePlan& plan, const ChannelGeometry& geometry,
                           const void* g, const void* x, void* partials, void* out, cudaStream_t s);

}  // namespace kernels
#endif  // MIXPREC_HAVE_CUDA

}  // namespace mixprec::cuda
