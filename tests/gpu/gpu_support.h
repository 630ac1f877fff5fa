// Shared helpers of the GPU tests (label gpu). Every test starts with MIXPREC_REQUIRE_GPU(): on a
// machine without a usable CUDA GPU it reports SKIPPED (ctest shows "Skipped"), never passed, or
// FAILED where MIXPREC_REQUIRE_GPU=1 says the machine has a GPU.
// CUDA results are copied back to the host and compared with the CPU backend's results on the same
// inputs within the DESIGN §4 tolerance of the dtype.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "mixprec/cuda.h"
#include "mixprec/mixprec.h"
#include "support/gpu_requirement.h"
#include "support/gradcheck.h"

// With MIXPREC_REQUIRE_GPU=1 in the environment (support/gpu_requirement.h) a missing GPU fails
// the test instead.
#define MIXPREC_REQUIRE_GPU()                                                               \
  do {                                                                                      \
    if (::mixprec::cuda::device_count() == 0) {                                             \
      if (::mixprec::testing::no_gpu_verdict() == ::mixprec::testing::NoGpuVerdict::fail) { \
        FAIL() << "no CUDA GPU (" << ::mixprec::cuda::unavailable_reason()                  \
               << ") but MIXPREC_REQUIRE_GPU=1: this machine is meant to have one";         \
      }                                                                                     \
      GTEST_SKIP() << "no CUDA GPU (" << ::mixprec::cuda::unavailable_reason() << ")";      \
    }                                                                                       \
  } while (0)

namespace mixprec::testing {

inline const Device kGpu = Device::cuda(0);

// A leaf copy of a CPU tensor on the GPU (requires_grad as asked).
inline Tensor on_gpu(const Tensor& t, bool requires_grad = false) {
  Tensor g = t.detach().to(kGpu);
  if (requires_grad) g.set_requires_grad(true);
  return g;
}

inline Tensor on_cpu(const Tensor& t) { return t.detach().to(Device::cpu()); }

inline Tolerance scaled(Tolerance t, double factor) { return {t.rtol * factor, t.atol * factor}; }

// The GPU tensor (copied back) against the CPU tensor: device, dtype, shape and values.
inline ::testing::AssertionResult matches(const Tensor& gpu, const Tensor& cpu, Tolerance tol) {
  if (!gpu.defined() || !cpu.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (!(gpu.device() == kGpu)) {
    return ::testing::AssertionFailure()
           << "result on " << gpu.device().to_string() << ", expected cuda:0";
  }
  if (gpu.dtype() != cpu.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(gpu.dtype()) << " vs " << dtype_name(cpu.dtype());
  }
  return all_close(on_cpu(gpu), cpu, tol);
}

// Uniform values in [lo, hi) drawn in float32 from a fixed seed and rounded to `dtype`: the same
// values go to both backends.
inline Tensor sample(const Shape& shape, double lo, double hi, DType dtype, std::uint64_t seed) {
  Generator gen(seed);
  return random_uniform(shape, lo, hi, {.dtype = DType::float32}, gen).to(dtype);
}

}  // namespace mixprec::testing
