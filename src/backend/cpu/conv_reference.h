// The plain-loop convolution (DESIGN §7.1): the oracle for the oneDNN kernels, the float64 path
// (gradient checks) and the path of Accumulation::compute_dtype, where every partial sum is
// rounded to the 16-bit dtype as 16-bit hardware accumulation does. Same NHWC / Keras-HWIO
// layouts and geometry as conv.h. Scalar and unblocked: correct first, slow (O(N OH OW Cout KH KW
// Cin/G) with no cache blocking; expect 1-2 orders of magnitude below oneDNN).
#pragma once

#include "backend/cpu/conv.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// How the loops sum products (mixprec::Accumulation):
//  - float32: in float64, rounded once to the storage dtype at the end (16-bit through float32);
//    the oracle, and the float64 path itself (wider than float32 accumulation, never narrower);
//  - compute_dtype: every partial sum rounded to the storage dtype, `sum = T(float(sum) + float(a)
//    * float(b))` in a fixed order (for float32 storage: plain float32 accumulation). A 16-bit
//    product is exact in float, so each step rounds once to float and once more to T.

// Tensors of one floating dtype (float64, float32, float16, bfloat16), any strides, shapes as in
// conv.h; bias may be undefined. The bias is added to the finished sum, then rounded once:
// y = T(sum + bias). Returns new contiguous tensors. Not differentiable.
Tensor conv2d_reference_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                                const ConvGeometry& g,
                                Accumulation accumulation = Accumulation::float32);
// dx[n, ih, iw, c] = sum over (kh, kw, o of c's group) of dy[n, oh, ow, o] w[kh, kw, c', o] for
// the (oh, ow) that read (ih, iw) through (kh, kw); summed in the order kh, kw, o.
Tensor conv2d_reference_backward_data(const Tensor& dy, const Tensor& filters,
                                      const ConvGeometry& g,
                                      Accumulation accumulation = Accumulation::float32);
// dw[kh, kw, i, o] = sum over (n, oh, ow) of x[n, ih, iw, group(o) * Cin/G + i] dy[n, oh, ow, o],
// summed in the order n, oh, ow.
Tensor conv2d_reference_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                                         Accumulation accumulation = Accumulation::float32);

}  // namespace mixprec::cpu
