// Whether a GPU test on a machine without a usable GPU is skipped or failed. By default it is
// skipped (ctest reports "Skipped", never passed: the CPU-only machines run the CUDA build too).
// On a machine that is meant to have a GPU, a driver or container problem that hides it would
// otherwise turn the whole GPU suite into skips that look like a clean run: there
// MIXPREC_REQUIRE_GPU=1 in the environment (set by the README's GPU command and
// scripts/gpu/build.sh's env.sh) makes "no GPU visible" a failure of every GPU test.
#pragma once

#include <cstdlib>
#include <cstring>

namespace mixprec::testing {

enum class NoGpuVerdict { skip, fail };

// `value`: the environment variable MIXPREC_REQUIRE_GPU (null when unset). "1" fails; anything
// else ("0", empty, unset) skips.
inline NoGpuVerdict no_gpu_verdict(const char* value) {
  return value != nullptr && std::strcmp(value, "1") == 0 ? NoGpuVerdict::fail : NoGpuVerdict::skip;
}

inline NoGpuVerdict no_gpu_verdict() { return no_gpu_verdict(std::getenv("MIXPREC_REQUIRE_GPU")); }

}  // namespace mixprec::testing
