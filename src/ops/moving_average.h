// In-place moving averages of non-trainable state (BatchNormalization's moving mean and variance):
// one backend launch for several small tensors instead of five tensor ops each.
#pragma once

#include <span>

#include "backend/training_kernels.h"

namespace mixprec::ops {

// For each operand: moving = moving * momentum + value * weight, each product and the sum
// rounded once to the dtype, as moving * momentum + value * weight written with tensor ops (and
// then assigned) gives. moving: a defined, contiguous float32 or float64 tensor; value: the same
// shape, dtype and device; every operand on one device. Not recorded by autograd. Throws
// ShapeError, DTypeError, DeviceError or ValueError naming `op` and the operand.
void moving_average_update(const char* op, std::span<const MovingAverageOperand> operands,
                           double momentum);

}  // namespace mixprec::ops
