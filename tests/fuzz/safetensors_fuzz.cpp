// libFuzzer target: io::parse_safetensors must load the input or throw a mixprec::Error.
#include <cstddef>
#include <cstdint>

#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)mixprec::io::parse_safetensors({reinterpret_cast<const std::byte*>(data), size}, "fuzz");
  } catch (const mixprec::Error&) {
  }
  return 0;
}
