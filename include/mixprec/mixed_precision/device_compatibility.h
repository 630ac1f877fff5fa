// Which policy suits this machine (DESIGN §2.2) and the one-time warnings for a policy the machine
// cannot run fast (DESIGN §2.6, in the spirit of Keras' "mixed precision compatibility check").
#pragma once

#include <string>
#include <vector>

#include "mixprec/mixed_precision/policy.h"
#include "mixprec/physical_devices.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::mixed_precision {

struct PolicyChoice {
  Policy policy;
  std::string reason;  // which device decided and why, one sentence
};

// mixed_float16 when an NVIDIA GPU of compute capability >= 7.0 (float16 tensor cores) is present,
// else mixed_bfloat16 when the CPU has native bfloat16 arithmetic (avx512_bf16 or AMX-BF16), else
// float32. Looks at list_physical_devices().
PolicyChoice pick_policy_for_device();
// The same decision for a given device list (another machine's, or a test's).
PolicyChoice pick_policy_for_device(const std::vector<PhysicalDevice>& devices);

// Logs, at most once per process for each policy, a warning when `policy` will run but slowly here:
//  - mixed_float16 without a GPU of compute capability >= 7.0;
//  - mixed_bfloat16 on a CPU without native bfloat16 (and no GPU of compute capability >= 8.0,
//    the first with bfloat16 tensor cores): memory is saved, compute is not faster than float32.
// Other policies never warn. set_global_policy() calls this; layers call it for a per-layer dtype.
// Never throws.
void check_policy_compatibility(const Policy& policy);
// The warning check_policy_compatibility() would log for `policy` on `devices`, one line without
// the policy's name (the log line is "<policy>: <warning>"); "" when none. On a CPU without a
// usable GPU, mixed_float16's warning ends with the advice: mixed_bfloat16 when the CPU has native
// bfloat16, else float32.
std::string policy_compatibility_warning(const Policy& policy,
                                         const std::vector<PhysicalDevice>& devices);

}  // namespace mixprec::mixed_precision

#pragma GCC visibility pop
