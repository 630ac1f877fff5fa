// Small helpers shared by the op tests: seeded random inputs and a guard for the oneDNN bf16 path.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"
#include "mixprec/mixprec.h"

namespace mixprec::testing {

// Normal(0, stddev) samples from a generator seeded with `seed`, in `dtype` (drawn in float64,
// then rounded once).
inline Tensor normal(const Shape& shape, std::uint64_t seed, DType dtype = DType::float32,
                     double stddev = 1.0) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {.dtype = dtype}, gen);
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
