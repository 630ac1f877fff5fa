// Argument checks shared by the ops: each names the op and what it received (DESIGN §2.7).
#pragma once

#include <string>

#include "mixprec/error.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

void check_defined(const char* op, const Tensor& t);
// Same dtype and device for both operands; the message names the op and both shapes/dtypes.
void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b);
void check_floating(const char* op, const Tensor& t);
// For ops that have no CUDA kernel yet: a DeviceError naming the op for a non-CPU tensor.
void check_cpu(const char* op, const Tensor& t);
// Both tensors on one device; the message names the op and both devices.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
std::string describe(const Tensor& t);  // "float16 (32, 10)"

}  // namespace mixprec::ops
