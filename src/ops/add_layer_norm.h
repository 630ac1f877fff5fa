// The pre-norm residual step as one op (internal: the functional model runs it for an Add node
// whose output also feeds a LayerNormalization or RMSNormalization node): s = a + b and
// y = layer_norm(s) (or rms_norm(s)), one pass over memory where the backend has the kernel
// (NnKernels::add_row_norm_forward), else add and the normalization composed. Bit for bit the
// unfused ops, forward and backward: s is rounded as add rounds it, y has layer_norm's statistics
// and rounding, and the autograd graph is add's node under s and the normalization's node on s, so
// the gradient reaching s (from y and from s's other consumers, summed by autograd) goes to a and b
// as add's does.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::ops {

struct AddNormOutput {
  Tensor sum;  // a + b in their dtype
  Tensor y;    // the normalization of sum over its last axis, in sum's dtype
};

// a and b: one floating dtype, device and shape (no broadcast: ShapeError), rank >= 1; gamma, beta
// and epsilon as layer_norm takes them (mixprec/transformer_ops.h). Differentiable in all four.
AddNormOutput add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& gamma,
                             const Tensor& beta, double epsilon);

// The same with rms_norm(s, gamma, epsilon).
AddNormOutput add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& gamma, double epsilon);

}  // namespace mixprec::ops
