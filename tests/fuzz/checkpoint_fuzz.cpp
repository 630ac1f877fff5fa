// libFuzzer target: io::read_checkpoint_info (the safetensors reader plus the checkpoint's JSON
// state) must read the input or throw a mixprec::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_file.h"
#include "mixprec/error.h"
#include "mixprec/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = mixprec::fuzz::write_input(data, size, "input.safetensors");
  try {
    (void)mixprec::io::read_checkpoint_info(path);
  } catch (const mixprec::Error&) {
  }
  return 0;
}
