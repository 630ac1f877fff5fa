// A process-wide on/off switch read from an environment variable on first use (on unless the
// variable is "0"), which a setter overrides and set(std::nullopt) hands back to the environment:
// MIXPREC_FUSION (ops/batch_norm_activation.h) and MIXPREC_CONV_GEMM (backend/cpu/conv.h), whose
// tests compare both settings in one process. Thread-safe. (The mixed-precision accumulation
// switches of mixed_precision/switches.cpp parse strictly and throw on other values instead.)
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace mixprec::core {

class EnvSwitch {
 public:
  explicit constexpr EnvSwitch(const char* variable) : variable_(variable) {}

  bool enabled() const {
    const int o = override_.load(std::memory_order_relaxed);
    if (o >= 0) return o == 1;
    int e = from_env_.load(std::memory_order_relaxed);
    if (e < 0) {
      const char* v = std::getenv(variable_);
      e = (v == nullptr || std::strcmp(v, "0") != 0) ? 1 : 0;
      from_env_.store(e, std::memory_order_relaxed);
    }
    return e == 1;
  }

  void set(std::optional<bool> enabled) {
    override_.store(enabled ? (*enabled ? 1 : 0) : -1, std::memory_order_relaxed);
  }

 private:
  const char* variable_;
  std::atomic<int> override_{-1};          // -1: the environment decides
  mutable std::atomic<int> from_env_{-1};  // -1 until the variable has been read
};

}  // namespace mixprec::core
