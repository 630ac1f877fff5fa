// CPU kernels of the per-channel broadcast (backend/channel_geometry.h): a binary op between a
// full (N, ..., C) tensor and a (N, 1, ..., 1, C) one without materialising the broadcast, and
// the gradient of the small operand of a product (the squeeze-and-excitation gate) in one pass.
#pragma once

#include "core/op_kinds.h"
#include "mixprec/shape.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// out = a (op) b when one operand is dense with out's shape and the other a dense per-channel
// broadcast of it; returns false (out untouched) for every other geometry.
bool binary_channel(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);

// d small for out = full * small (small broadcast per channel, channel_geometry(full, small)
// defined): sum over the broadcast axes of g * full, accumulated in float (double for float64)
// blocks added in double, rounded once to g's dtype, of shape small_shape. g and full contiguous,
// of one shape and dtype.
Tensor channel_gate_backward(const Tensor& g, const Tensor& full, const Shape& small_shape);

}  // namespace mixprec::cpu
