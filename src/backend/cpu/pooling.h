// CPU 2-D max and average pooling, NHWC: oneDNN forward and backward for float32 and the 16-bit
// dtypes, plain loops for float64 and as the test oracle.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"
#include "backend/nn_kernels.h"
#include "core/op_kinds.h"
#include "core/window_geometry.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// PoolSaved, PoolForward and SaveForBackward (backend/nn_kernels.h): max pooling on oneDNN keeps
// oneDNN's workspace (where each window's maximum was) in PoolSaved::argmax and the data type it
// ran in (native_bf16); the workspace's layout does not depend on the data type, so the float32
// backward primitive reads a native bf16 forward's workspace. The float64 path keeps x and finds
// the maxima again.

// x contiguous, of dtype float32/float16/bfloat16 (oneDNN) or float64 (the loops). float16, and
// bfloat16 without native support or with the fallback forced (use_native_bf16()), run in float32
// on exactly widened copies and are rounded once. The maximum of each window is the first one in
// row-major window order (the gradient goes there).
PoolForward pool2d_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                           SaveForBackward save);
// dx (batch, in_h, in_w, channels) from dy (batch, out_h, out_w, channels) of x's dtype; `state`
// is what pool2d_forward saved. Gradients of overlapping windows add up (in float32 for 16-bit
// dtypes, rounded once).
Tensor pool2d_backward(PoolKind kind, const Tensor& dy, const PoolSaved& state,
                       const PoolGeometry& g);

// The oracle: plain loops on any floating dtype and strides, float64 arithmetic, one rounding to
// the dtype. Max sends the gradient to the first maximum of each window.
Tensor pool2d_reference_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g);
Tensor pool2d_reference_backward(PoolKind kind, const Tensor& dy, const Tensor& x,
                                 const PoolGeometry& g);

PrimitiveCacheStats pooling_cache_stats();
void clear_pooling_cache();

}  // namespace mixprec::cpu
