// Small helpers shared by the op tests: seeded random inputs and a guard for the oneDNN bf16 path.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"
#include "core/op_kinds.h"
#include "mixprec/mixprec.h"

namespace mixprec::testing {

// Normal(0, stddev) samples from a generator seeded with `seed`, in `dtype` (drawn in float64,
// then rounded once).
inline Tensor normal(const Shape& shape, std::uint64_t seed, DType dtype = DType::float32,
                     double stddev = 1.0) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {.dtype = dtype}, gen);
}

// Normal(mean, stddev) samples, likewise (inputs away from zero: batch-norm statistics tests).
inline Tensor normal(const Shape& shape, std::uint64_t seed, double mean, double stddev,
                     DType dtype = DType::float32) {
  Generator gen(seed);
  return random_normal(shape, mean, stddev, {.dtype = dtype}, gen);
}

// The unfused activation op `act` (relu, relu6, sigmoid, silu, tanh) applied to y: the reference
// composition the fused kernels are tested against.
inline Tensor activation(UnaryOp act, const Tensor& y) {
  switch (act) {
    case UnaryOp::relu: return relu(y);
    case UnaryOp::relu6: return relu6(y);
    case UnaryOp::sigmoid: return sigmoid(y);
    case UnaryOp::tanh: return tanh(y);
    default: return silu(y);
  }
}

// Sets the oneDNN bf16 path (native or converted to float32; matmul, conv, pooling and batch norm
// share it) and restores the previous one on scope exit.
class Bf16PathGuard {
 public:
  explicit Bf16PathGuard(cpu::Bf16Path path) : previous_(cpu::set_bf16_path(path)) {}
  ~Bf16PathGuard() { cpu::set_bf16_path(previous_); }
  Bf16PathGuard(const Bf16PathGuard&) = delete;
  Bf16PathGuard& operator=(const Bf16PathGuard&) = delete;

 private:
  cpu::Bf16Path previous_;
};

}  // namespace mixprec::testing
