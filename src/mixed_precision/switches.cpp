// fp16_matmul_use_fp32_compute() and friends (declared in policy.h): process-wide flags whose
// first read takes the environment variable and whose setters override it.
#include "mixed_precision/switches.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "mixprec/error.h"
#include "mixprec/mixed_precision/policy.h"

namespace mixprec::mixed_precision {

namespace internal {

bool parse_switch(std::string_view name, const char* value) {
  if (value == nullptr) return true;
  const std::string_view v(value);
  if (v == "1") return true;
  if (v == "0") return false;
  throw ValueError(std::string(name) +
                   " must be \"1\" (accumulate 16-bit products in float32, "
                   "the default) or \"0\" (accumulate in the 16-bit compute dtype), got \"" +
                   std::string(v) + "\"; set it to 0 or 1, or unset it");
}

}  // namespace internal

namespace {

// -1 until the environment has been read (or a setter ran); then 0 or 1. Lock-free: a racing first
// read parses the same environment and compare_exchange keeps whichever value landed first, so a
// setter that ran concurrently is never overwritten by the environment.
class Switch {
 public:
  explicit constexpr Switch(std::string_view variable) : variable_(variable) {}

  bool get() {
    const int s = state_.load(std::memory_order_acquire);
    if (s >= 0) return s == 1;
    // getenv needs a NUL-terminated name; the variables are string literals, so data() is one.
    // A bad value throws here, and again on the next read (the state stays unread).
    const int parsed = internal::parse_switch(variable_, std::getenv(variable_.data())) ? 1 : 0;
    int expected = -1;
    state_.compare_exchange_strong(expected, parsed, std::memory_order_acq_rel);
    return state_.load(std::memory_order_acquire) == 1;
  }

  void set(bool enabled) { state_.store(enabled ? 1 : 0, std::memory_order_release); }

 private:
  std::string_view variable_;
  std::atomic<int> state_{-1};
};

constinit Switch g_matmul_switch(internal::kMatmulSwitchVariable);
constinit Switch g_conv_switch(internal::kConvSwitchVariable);

}  // namespace

bool fp16_matmul_use_fp32_compute() { return g_matmul_switch.get(); }
bool fp16_conv_use_fp32_compute() { return g_conv_switch.get(); }
void set_fp16_matmul_use_fp32_compute(bool enabled) { g_matmul_switch.set(enabled); }
void set_fp16_conv_use_fp32_compute(bool enabled) { g_conv_switch.set(enabled); }

}  // namespace mixprec::mixed_precision
