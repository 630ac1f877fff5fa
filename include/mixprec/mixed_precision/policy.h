// Dtype policies (DESIGN §2.2): the dtype a layer computes in and the dtype its variables are
// stored in. Layers created after set_global_policy() take the global policy unless their `dtype`
// option names another.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/dtype.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::mixed_precision {

class Policy {
 public:
  // "float32" (the default), "mixed_float16", "mixed_bfloat16", "float16", "bfloat16", "float64".
  // Any other name throws ValueError listing the valid names.
  Policy(std::string_view name);  // NOLINT: implicit, so that {.dtype = "float32"} reads naturally
  Policy(const char* name) : Policy(std::string_view(name)) {}         // NOLINT
  Policy(const std::string& name) : Policy(std::string_view(name)) {}  // NOLINT: CLI --policy
  Policy() : Policy("float32") {}

  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  // True when compute and variable dtypes differ (the mixed_* policies).
  bool is_mixed() const { return compute_ != variable_; }
  bool operator==(const Policy& other) const { return name_ == other.name_; }

  static std::vector<std::string> valid_names();

 private:
  std::string name_;
  DType compute_ = DType::float32;
  DType variable_ = DType::float32;
};

// Writes what Keras's repr shows: <Policy "mixed_float16">.
std::ostream& operator<<(std::ostream& os, const Policy& policy);

// The process-wide policy (default float32); thread-safe. Setting it runs
// check_policy_compatibility() (device_compatibility.h), which warns once per process when the
// machine cannot run the policy fast.
void set_global_policy(const Policy& policy);
Policy global_policy();

// Accumulation dtype of matmul/convolution under a float16/bfloat16 compute dtype (DESIGN §2.4).
// Defaults come from MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE / MIXPREC_FP16_CONV_USE_FP32_COMPUTE
// ("1", the default: float32 accumulation; "0": accumulate in the 16-bit compute dtype), read once;
// the setters override them for the process.
bool fp16_matmul_use_fp32_compute();
bool fp16_conv_use_fp32_compute();
void set_fp16_matmul_use_fp32_compute(bool enabled);
void set_fp16_conv_use_fp32_compute(bool enabled);

}  // namespace mixprec::mixed_precision

#pragma GCC visibility pop
