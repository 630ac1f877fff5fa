#include "mixprec/mixed_precision/policy.h"

#include <array>
#include <mutex>
#include <ostream>

#include "mixprec/error.h"
#include "mixprec/mixed_precision/device_compatibility.h"

namespace mixprec::mixed_precision {

namespace {

struct PolicyInfo {
  std::string_view name;
  DType compute;
  DType variable;
};

// DESIGN §2.2. The order is the order the error message lists them in: the common ones first.
constexpr std::array<PolicyInfo, 6> kPolicies = {{
    {"float32", DType::float32, DType::float32},
    {"mixed_float16", DType::float16, DType::float32},
    {"mixed_bfloat16", DType::bfloat16, DType::float32},
    {"float16", DType::float16, DType::float16},
    {"bfloat16", DType::bfloat16, DType::bfloat16},
    {"float64", DType::float64, DType::float64},
}};

std::string joined_names() {
  std::string names;
  for (const PolicyInfo& info : kPolicies) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

struct GlobalPolicy {
  std::mutex mutex;
  Policy policy;  // float32
};

GlobalPolicy& global() {
  static GlobalPolicy g;
  return g;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Policy& policy) {
  return os << "<Policy \"" << policy.name() << "\">";
}

Policy::Policy(std::string_view name) {
  for (const PolicyInfo& info : kPolicies) {
    if (info.name == name) {
      name_ = std::string(info.name);
      compute_ = info.compute;
      variable_ = info.variable;
      return;
    }
  }
  throw ValueError("unknown policy '" + std::string(name) + "'; valid policies: " + joined_names());
}

std::vector<std::string> Policy::valid_names() {
  std::vector<std::string> names;
  for (const PolicyInfo& info : kPolicies) names.emplace_back(info.name);
  return names;
}

void set_global_policy(const Policy& policy) {
  {
    std::lock_guard lock(global().mutex);
    global().policy = policy;
  }
  // Outside the lock: the check lists devices and may call the user's log handler.
  check_policy_compatibility(policy);
}

Policy global_policy() {
  std::lock_guard lock(global().mutex);
  return global().policy;
}

}  // namespace mixprec::mixed_precision
