// The DESIGN §2.4 accumulation switches: their environment variables and the parsing of their
// values, separate from the process-wide state so that tests can check the parsing directly (the
// environment is read only once per process).
#pragma once

#include <string_view>

namespace mixprec::mixed_precision::internal {

inline constexpr std::string_view kMatmulSwitchVariable = "MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE";
inline constexpr std::string_view kConvSwitchVariable = "MIXPREC_FP16_CONV_USE_FP32_COMPUTE";

// The value of switch `name` given the environment variable's value: nullptr (unset) or "1" is
// true (float32 accumulation), "0" is false (accumulate in the 16-bit compute dtype). Anything
// else, including "" and " 1", throws ValueError naming the variable and the value.
bool parse_switch(std::string_view name, const char* value);

}  // namespace mixprec::mixed_precision::internal
