// Sets the global dtype policy for the lifetime of a test scope and restores the previous one.
#pragma once

#include "mixprec/mixed_precision/policy.h"

namespace mixprec::testing {

struct PolicyGuard {
  mixed_precision::Policy saved = mixed_precision::global_policy();
  PolicyGuard() = default;  // only restores
  explicit PolicyGuard(const mixed_precision::Policy& p) { mixed_precision::set_global_policy(p); }
  ~PolicyGuard() { mixed_precision::set_global_policy(saved); }
  PolicyGuard(const PolicyGuard&) = delete;
  PolicyGuard& operator=(const PolicyGuard&) = delete;
};

}  // namespace mixprec::testing
