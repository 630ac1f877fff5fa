// Pointwise (1x1, unpadded, ungrouped) convolutions on the CPU as matrix products. In
// NHWC such a convolution is one matmul: the activations are an (N*H*W, C) matrix and the Keras
// filters (1, 1, Cin, Cout) a (Cin, Cout) one, so forward, backward data and backward filters are
// x.w, dy.w^T and x^T.dy, which oneDNN's matmul runs far faster than its 1x1 convolution kernels
// at the small spatial extents of a CNN's late stages (measured 2026-11-26 on a 2-core Xeon with
// AMX: EfficientNet-B0's 1152->192 backward filters at 2x2, batch 32, 1.1-1.4 ms per call as a
// bf16 convolution under ONEDNN_VERBOSE, 0.06 ms as a matmul in a standalone oneDNN test
// program), and without reordering the filters into a blocked layout. A strided one
// (ResNet's projection shortcuts) reads every stride-th position: those are gathered into a
// contiguous copy first, and its input gradient is zero elsewhere.
#pragma once

#include "core/window_geometry.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Whether g is a pointwise convolution these functions take: a 1x1 kernel, any strides, no
// padding, one group, out_h = (in_h - 1) / stride_h + 1 (and likewise the width).
bool is_pointwise_geometry(const ConvGeometry& g);

// The three passes, with the contract of cpu::conv2d_forward / conv2d_backward_data /
// conv2d_backward_filters (conv.h): contiguous CPU tensors of one dtype (float32, float16 or
// bfloat16), checked by the caller; `bias32` is an undefined tensor or the float32 bias. A 16-bit
// result is the float32 result (bias included) rounded once.
Tensor pointwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                         const ConvGeometry& g);
Tensor pointwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g);
Tensor pointwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

}  // namespace mixprec::cpu
