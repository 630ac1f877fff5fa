// Conv2D + bias + relu / relu6 as one op (the CPU's convolution-activation fusion): the
// convolution's output is activated in place (NnKernels::activation_in_place, our NaN-preserving
// loop: oneDNN's relu post-ops map NaN to 0, see backend/cpu/conv.cpp) and one autograd node
// differentiates the activation from that output, then the convolution. The same values and
// gradients as relu(conv2d(...)), bit for bit; it saves the separate activation op, its output
// allocation and a pass. Where the device has no in-place activation it composes the two ops.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

// activation is UnaryOp::relu or UnaryOp::relu6 (anything else is a ValueError); the arguments
// and checks of conv2d.
Tensor conv2d_activation(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const Conv2dOptions& options, UnaryOp activation);

}  // namespace mixprec::ops
