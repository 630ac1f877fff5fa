#include "ops/checks.h"

namespace mixprec::ops {

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + t.shape().to_string();
}

void check_defined(const char* op, const Tensor& t) {
  if (!t.defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
}

void check_same_dtype_device(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
  if (a.dtype() != b.dtype()) {
    throw DTypeError(std::string(op) + ": dtype mismatch between " + describe(a) + " and " +
                     describe(b) + "; cast one operand with .to(dtype)");
  }
  if (!(a.device() == b.device())) {
    throw DeviceError(std::string(op) + ": operands on different devices (" +
                      a.device().to_string() + " and " + b.device().to_string() +
                      "); move one with .to(device)");
  }
}

void check_floating(const char* op, const Tensor& t) {
  check_defined(op, t);
  if (!is_floating(t.dtype())) {
    throw DTypeError(std::string(op) + " does not support dtype " +
                     std::string(dtype_name(t.dtype())) +
                     "; supported: float32, float16, bfloat16, float64");
  }
}

void check_cpu(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) {
    throw DeviceError(std::string(op) + ": tensors on " + t.device().to_string() +
                      " are not supported yet (CPU only); move them with .to(Device::cpu())");
  }
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (!(a.device() == b.device())) {
    throw DeviceError(std::string(op) + ": operands on different devices (" +
                      a.device().to_string() + " and " + b.device().to_string() +
                      "); move one with .to(device)");
  }
}

}  // namespace mixprec::ops
